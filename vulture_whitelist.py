"""Names that vulture (dead-code finder) cannot see used, because Django, Celery
or a template calls them by name. Run it over the project with this file:

    .venv/bin/vulture . vulture_whitelist.py --min-confidence 60 \
        --exclude ".venv,*/migrations/*,var"

Only such framework-called names belong here; a function nothing calls is
deleted, not listed. Not imported by anything: vulture only parses it.
"""

# ruff: noqa: F821, B018

# Django, everywhere: admin options, model Meta, forms' hooks, management
# commands, app configs, migrations.
list_display
list_filter
list_select_related
raw_id_fields
readonly_fields
search_fields
Meta
abstract
ordering
constraints
indexes
_.label_from_instance  # ModelChoiceField's hook
help  # BaseCommand
_.add_arguments  # BaseCommand
dependencies  # Migration
operations  # Migration
initial  # Migration

# annotation and evaluation: registered by decorator or named in INSTALLED_APPS.
CampaignAdmin
AssignmentAdmin
LabelAdmin
LabelRevisionAdmin
AnnotationConfig
MatcherModelAdmin
AbbreviationAdmin
EvaluationConfig
_.clean_seed  # CampaignForm.clean_<field>
# TextChoices members, read through .choices and the stored values.
IMPROVING
STABLE
DETERIORATING
POTENTIALLY_HARMFUL
# Columns written for the record, read by the admin site and the exports.
judged_at
invited_at
adopted_at
added_at
closed_at
built_at
# Celery tasks sent by name through the outbox (jobs.outbox.outbox_send).
agreement_recompute_task
calibration_draw_task
# Read by templates.
_.pairs_total  # calibration_list.html
# Read with getattr(result, f"{field}_one_to_one") (oracle.gold_comparison).
actions_one_to_one
red_flags_one_to_one
