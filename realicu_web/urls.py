"""Top-level URL routes."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from accounts.forms import SignInForm
from realicu_web import views

urlpatterns = [
    path("", views.home, name="home"),
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(authentication_form=SignInForm),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("annotate/", include("annotation.urls")),
    path("oracle/", include("oracle.urls")),
    path("releases/", include("exports.urls")),
    path("agents/", include("agents.urls")),
    path("data-use/", include("datause.urls")),
    path("surveillance/", include("surveillance.urls")),
    path("api/v1/", include("exports.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api_schema"),
    # Swagger UI from drf-spectacular-sidecar, its set-up script served from the
    # same address (?script) rather than inline, as the CSP has no inline script.
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(url_name="api_schema"),
        name="api_docs",
    ),
    path("", include("windows.urls")),
]
