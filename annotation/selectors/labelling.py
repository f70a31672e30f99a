"""Reads behind the labelling form: the window's recorded actions the physician
rates (critical by the campaign's rules) and those left out, and the free-text
suggestions drawn from the campaign's labels that blindness lets the user read
(annotation.blindness.suggestion_labels)."""

from __future__ import annotations

from collections import Counter

from django.db import connection
from django.db.models import QuerySet

from accounts.roles import user_is_admin, user_is_physician
from annotation import blindness
from annotation.critical import critical_action_q
from annotation.models import Assignment, Campaign, CampaignPhysician, Label
from windows.models import Event
from windows.selectors_context import window_actions

SUGGESTION_FIELDS = blindness.TEXT_FIELDS


def recorded_critical_actions(*, assignment: Assignment) -> QuerySet[Event]:
    """The window's recorded actions that the campaign counts as critical, by
    time: the actions the physician rates. Routine ones are left out."""
    return window_actions(window=assignment.window).filter(
        critical_action_q(assignment.campaign.critical_action_categories)
    )


def recorded_routine_actions(*, assignment: Assignment) -> QuerySet[Event]:
    """The window's recorded actions that the campaign's rules leave out of
    rating (routine: insulin, electrolytes, prophylaxis, ...), by time: the page
    lists them, so a physician sees why an action of the window is not rated."""
    return window_actions(window=assignment.window).exclude(
        critical_action_q(assignment.campaign.critical_action_categories)
    )


def term_suggestions(
    *,
    user,
    campaign: Campaign,
    field: str,
    prefix: str,
    limit: int = 10,
) -> list[tuple[str, int]]:
    """Free-text items already used in ``field`` in the campaign, as
    ``(text, uses)``, most used first, matching ``prefix`` at the start of a word.

    Only texts and their counts over the campaign are returned, never whose or
    on which window. Which labels may be read is blindness's
    (``annotation.blindness.suggestion_labels``): the user's own, others'
    submitted ones, and nothing of anyone who co-rates a window the user still
    has open, in any campaign. Only the campaign's physicians and admins get
    suggestions.
    """
    if field not in SUGGESTION_FIELDS:
        return []
    if not (
        user_is_admin(user)
        or (
            user_is_physician(user)
            and CampaignPhysician.objects.filter(campaign=campaign, user=user).exists()
        )
    ):
        return []
    prefix = (prefix or "").strip().lower()
    if not prefix:
        return []
    limit = max(1, min(int(limit), 50))
    labels = blindness.suggestion_labels(user=user, campaign=campaign)
    if connection.vendor == "postgresql":
        return _suggestions_postgresql(
            labels=labels, field=field, prefix=prefix, limit=limit
        )
    return _suggestions_python(labels=labels, field=field, prefix=prefix, limit=limit)


def _word_prefix_match(text: str, prefix: str) -> bool:
    lowered = text.lower()
    return lowered.startswith(prefix) or f" {prefix}" in lowered


def _suggestions_python(
    *, labels: QuerySet[Label], field: str, prefix: str, limit: int
) -> list[tuple[str, int]]:
    """The portable version (SQLite, the embedded default)."""
    uses: Counter = Counter()
    spellings: dict[str, Counter] = {}
    for payload in labels.values_list("payload", flat=True):
        for item in (payload or {}).get(field) or []:
            text = (item.get("text") or "").strip() if isinstance(item, dict) else ""
            if not text or not _word_prefix_match(text, prefix):
                continue
            key = " ".join(text.lower().split())
            uses[key] += 1
            spellings.setdefault(key, Counter())[text] += 1
    ranked = sorted(uses.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    return [(spellings[key].most_common(1)[0][0], n) for key, n in ranked]


def _suggestions_postgresql(
    *, labels: QuerySet[Label], field: str, prefix: str, limit: int
) -> list[tuple[str, int]]:
    """Unnests the items in the database: one query whatever the campaign's size.
    Texts are grouped case- and space-insensitively and shown in their most used
    spelling."""
    ids_sql, ids_params = labels.values("id").query.sql_with_params()
    like = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    sql = f"""
        SELECT mode() WITHIN GROUP (ORDER BY t.text) AS text, count(*) AS uses
        FROM annotation_label l
        CROSS JOIN LATERAL (
            SELECT btrim(item->>'text') AS text
            FROM jsonb_array_elements(
                CASE WHEN jsonb_typeof(l.payload->%s) = 'array'
                     THEN l.payload->%s ELSE '[]'::jsonb END
            ) AS item
            WHERE jsonb_typeof(item) = 'object'
        ) t
        WHERE l.id IN ({ids_sql})
          AND t.text <> ''
          AND (lower(t.text) LIKE %s OR lower(t.text) LIKE %s)
        GROUP BY regexp_replace(lower(t.text), '\\s+', ' ', 'g')
        ORDER BY uses DESC, 1
        LIMIT %s
    """
    params = [field, field, *ids_params, f"{like}%", f"% {like}%", limit]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [(text, uses) for text, uses in cursor.fetchall()]
