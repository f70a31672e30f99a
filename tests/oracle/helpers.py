"""Constructed ICU stays for the Oracle tests, built with tests.factories (whose
builders put a stay's clinical events at hours since its admission)."""

from __future__ import annotations

from tests.factories import make_stay, vitals
from windows.models import Window
from windows.windowing import windows_build


def stable_stay(hours: float = 24.0):
    """Normal, unchanging vitals every 30 minutes from an hour before admission."""
    stay = make_stay(hours=hours)
    vitals(stay, "heart_rate", 80, start_h=-1, end_h=hours, unit="bpm")
    vitals(stay, "map", 80, start_h=-1, end_h=hours, unit="mmHg")
    vitals(stay, "spo2", 97, start_h=-1, end_h=hours, unit="%")
    return stay


def windows_of(stay) -> list[Window]:
    windows_build(stay=stay)
    return list(Window.objects.filter(stay=stay).order_by("index"))
