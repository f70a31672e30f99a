"""Ids that users send, bounded to the database's integer range: the
``<id:...>`` path converter of every URL that names a row, ``id_parse`` for a
posted or JSON id, and the model choice fields of the forms. An id beyond the
range names no row: it is refused (404, or the form's error) before it reaches
the database, where SQLite raises OverflowError (a 500)."""

from __future__ import annotations

import re

from django import forms

# BigAutoField, and every id column, is a signed 64-bit integer on PostgreSQL
# and SQLite alike.
MAX_ID = 2**63 - 1
# IntegerField (a seed, a count) on PostgreSQL: a signed 32-bit integer.
MAX_INT32 = 2**31 - 1

_DIGITS = re.compile(r"[0-9]{1,19}")


def id_parse(value) -> int | None:
    """``value`` as an id (an int, an integral float, or a string of digits)
    from 0 to MAX_ID, else None. Booleans are not ids."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not value.is_integer():
            return None
        value = int(value)  # a finite float: integral ones only
    if isinstance(value, int):
        return value if 0 <= value <= MAX_ID else None
    if isinstance(value, str):
        value = value.strip()
        if _DIGITS.fullmatch(value):
            number = int(value)
            return number if number <= MAX_ID else None
    return None


class IdConverter:
    """``<id:name>`` in a URL: 1 to 19 digits up to MAX_ID; anything else
    matches no route (a 404), so a view only ever gets an id in range."""

    regex = "[0-9]{1,19}"

    def to_python(self, value: str) -> int:
        number = id_parse(value)
        if number is None:
            raise ValueError(f"{value} is beyond the database's integer range")
        return number

    def to_url(self, value) -> str:
        return str(int(value))


class IdChoiceField(forms.ModelChoiceField):
    """A ModelChoiceField whose posted id is checked against the range before
    the query: a value out of range is the field's 'not one of the choices'."""

    def to_python(self, value):
        if (
            value not in self.empty_values
            and not isinstance(value, self.queryset.model)
            and self.to_field_name is None
            and id_parse(value) is None
        ):
            raise forms.ValidationError(
                self.error_messages["invalid_choice"], code="invalid_choice"
            )
        return super().to_python(value)


class IdMultipleChoiceField(forms.ModelMultipleChoiceField):
    """A ModelMultipleChoiceField refusing, by name, a posted id out of range
    before its ``pk__in`` query."""

    def _check_values(self, value):
        if self.to_field_name is None:
            for pk in value:
                if not isinstance(pk, self.queryset.model) and id_parse(pk) is None:
                    raise forms.ValidationError(
                        self.error_messages["invalid_pk_value"],
                        code="invalid_pk_value",
                        params={"pk": pk},
                    )
        return super()._check_values(value)
