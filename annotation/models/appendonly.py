"""Rows that are a record, written once: a label's revisions and the admins'
adjudication decisions (spec section 4). Django refuses to change or delete
them here; the database's triggers (migrations 0002 and 0003) refuse the same
for any other writer."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models


class AppendOnlyQuerySet(models.QuerySet):
    """Refuses bulk updates and deletes, with the model's own sentence."""

    def update(self, **kwargs):
        raise ValidationError(self.model.append_only_refusal.format(verb="changed"))

    def delete(self):
        raise ValidationError(self.model.append_only_refusal.format(verb="deleted"))


class AppendOnlyModel(models.Model):
    """A model whose rows are saved once and never changed or deleted.

    ``append_only_refusal`` is the sentence a refused write raises, with
    ``{verb}`` for "changed" or "deleted".
    """

    append_only_refusal = "These rows are append-only: they are never {verb}."

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise ValidationError(self.append_only_refusal.format(verb="changed"))
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ValidationError(self.append_only_refusal.format(verb="deleted"))
