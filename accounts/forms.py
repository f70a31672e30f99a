"""The sign-in form."""

from __future__ import annotations

from django.contrib.auth.forms import AuthenticationForm
from django.core.validators import MaxLengthValidator


class SignInForm(AuthenticationForm):
    """Django's sign-in form, refusing a username longer than any account's
    before it authenticates: django-axes records each failure's username in a
    255-character column, so a 5,000-character one was a database error (a
    500 on PostgreSQL). Django sets the field's max_length without its
    validator; no account can have such a name, so nothing is counted."""

    def __init__(self, request=None, *args, **kwargs):
        super().__init__(request, *args, **kwargs)
        username = self.fields["username"]
        username.validators.append(MaxLengthValidator(username.max_length))
