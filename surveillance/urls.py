"""Surveillance pages, under surveillance/."""

from django.urls import path

from surveillance import views

app_name = "surveillance"

urlpatterns = [
    path("stays/<id:stay_id>/", views.stay_checkpoints, name="stay_checkpoints"),
]
