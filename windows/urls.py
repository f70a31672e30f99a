"""Pages for imported clinical data."""
from django.urls import path

from windows import views

app_name = "windows"

urlpatterns = [
    path("stays/", views.stay_list, name="stay_list"),
]
