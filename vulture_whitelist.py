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
field_order  # Form: its fields' order
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
invited_by
adopted_at
added_at
added_by
_.added_by  # evaluation.admin sets it on save
adjudicated_at
assigned_by
_.assigned_by
closed_at
built_at
deactivated_at
_.deactivated_at
previous_tau
reassigned_from
tau_at_draw
# Celery tasks sent by name through the outbox (jobs.outbox.outbox_send).
window_agreement_task
agreement_recompute_task
calibration_draw_task
# Read by templates.
_.pairs_total  # calibration_list.html
# Read with getattr(result, f"{field}_one_to_one") (oracle.gold_comparison).
problems_one_to_one
actions_one_to_one
red_flags_one_to_one
# Dataclass fields read as a whole, through dataclasses.asdict: the benchmark
# scores (evaluation.metrics.BenchmarkScores.as_dict).
n_missing_predictions
n_status_windows
n_problem_windows
problems_hit_at_k
problems_recall_at_k
n_action_windows
actions_hit_at_k
actions_recall_at_k
n_hrr_stays
actions_hrr_at_k

# exports, datause, client, surveillance, jobs, accounts, realicu_web, windows
# and benchmarks (issue 37):
# Django app config
AccountsConfig  # accounts/apps.py
DataUseConfig  # datause/apps.py
verbose_name  # datause/apps.py
ExportsConfig  # exports/apps.py
JobsConfig  # jobs/apps.py
SurveillanceConfig  # surveillance/apps.py
default_auto_field  # surveillance/apps.py
WindowsConfig  # windows/apps.py
# template tag or filter
may_see_clinical_data  # accounts/templatetags/roles.py
ago  # accounts/templatetags/timing.py
data_use_terms  # datause/templatetags/datause.py
egress_provenance  # datause/templatetags/datause.py
may_use_releases  # exports/templatetags/exports_tags.py
# Django setting of a benchmark
_.PASSWORD_HASHERS  # benchmarks/agreement_bench.py
# the researchers' client API
_.redirect_request  # client/realicu_client/api.py
newurl  # client/realicu_client/api.py
req  # client/realicu_client/api.py
_.wait_for_scores  # client/realicu_client/api.py
_.publish  # client/realicu_client/api.py
_.model_input  # client/realicu_client/context.py
iterate_checkpoints  # client/realicu_client/surveillance.py
prediction  # client/realicu_client/surveillance.py
# Django admin
_.has_add_permission  # datause/admin.py
_.has_change_permission  # datause/admin.py
_.has_delete_permission  # datause/admin.py
CredentialAdmin  # datause/admin.py
AttestationAdmin  # datause/admin.py
EgressDecisionAdmin  # datause/admin.py
AuditEventAdmin  # datause/admin.py
date_hierarchy  # datause/admin.py
can_delete  # exports/admin.py
ReleaseAdmin  # exports/admin.py
inlines  # exports/admin.py
SubmissionAdmin  # exports/admin.py
ApiTokenAdmin  # exports/admin.py
_.shown_prefix  # exports/admin.py
show_change_link  # windows/admin.py
PatientAdmin  # windows/admin.py
AdmissionAdmin  # windows/admin.py
StayAdmin  # windows/admin.py
_.length_hours_display  # windows/admin.py
EventAdmin  # windows/admin.py
show_full_result_count  # windows/admin.py
ImportRunAdmin  # windows/admin.py
DataSourceAdmin  # windows/admin.py
# Django model field or option
recorded_by  # datause/models.py
recorded_at  # datause/models.py
revoked_by  # datause/models.py
_.state_label  # datause/models.py
attested_by  # datause/models.py
ENDPOINT_REGISTER  # datause/models.py
_.published_files  # exports/models.py
last_error  # jobs/models.py
beat_at  # jobs/models.py
description  # windows/models.py
sex  # windows/models.py
admission_type  # windows/models.py
age_at_admission  # windows/models.py
SURVIVED  # windows/models.py
source_ids  # windows/models.py
diagnosis_code  # windows/models.py
diagnosis_version  # windows/models.py
end_time  # windows/models.py
started_by  # windows/models.py
event_count  # windows/models.py
# Django URLconf
app_name  # datause/urls.py
urlpatterns  # datause/urls.py
# Django REST framework hook or serializer field
_.has_permission  # exports/api.py
authentication_classes  # exports/api.py
permission_classes  # exports/api.py
throttle_classes  # exports/api.py
throttle_scope  # exports/api.py
page_size  # exports/api.py
page_size_query_param  # exports/api.py
max_page_size  # exports/api.py
renderer_classes  # exports/api.py
_.validate  # exports/api.py
prediction_count  # exports/api.py
scored_at  # exports/api.py
parser_classes  # exports/api.py
_.throttle_scope  # exports/api.py
gold_campaign_id  # exports/api.py
gold_campaign_name  # exports/api.py
latest_validation_report  # exports/api.py
_.get_backbone_kind  # exports/api.py
_.get_latest_validation_report  # exports/api.py
validation_reports  # exports/api.py
api_exception_handler  # exports/api_errors.py
_.authenticate_credentials  # exports/authentication.py
media_type  # exports/downloads.py
charset  # exports/downloads.py
accepted_media_type  # exports/downloads.py
renderer_context  # exports/downloads.py
_.allow_request  # exports/throttling.py
BoundedJSONParser  # realicu_web/jsonlimits.py
# Django management command
requires_system_checks  # exports/management/commands/build_release.py
# Celery task, sent by name
release_build_task  # exports/tasks.py
submission_score_task  # exports/tasks.py
import_run_execute_task  # windows/tasks.py
build_batch_execute_task  # windows/tasks.py
import_batch_execute_task  # windows/tasks.py
# kombu transport method
_._put  # realicu_web/broker.py
_._restore  # realicu_web/broker.py
# Celery signal handler or bootstep
_filesystem_broker_folders  # realicu_web/celery.py
_remember_worker_main_process  # realicu_web/celery.py
_warm_up_pool_child  # realicu_web/celery.py
_warm_up_single_process_pool  # realicu_web/celery.py
_side_threads_start  # realicu_web/celery.py
_side_threads_stop  # realicu_web/celery.py
requires  # realicu_web/celery.py
# named in settings, called by Django
_.get_response_async  # realicu_web/handler.py
ForgedSessionCookieMiddleware  # realicu_web/middleware.py
RequestHygieneMiddleware  # realicu_web/middleware.py
SessionIdleTimeoutMiddleware  # realicu_web/middleware.py
StaticFilesStorage  # realicu_web/staticstorage.py
manifest_strict  # realicu_web/staticstorage.py
# Django setting
ALLOWED_HOSTS
CSRF_TRUSTED_ORIGINS
ROOT_URLCONF
WSGI_APPLICATION
TEMPLATES
DEFAULT_AUTO_FIELD
LOGIN_URL
LOGIN_REDIRECT_URL
LOGOUT_REDIRECT_URL
LANGUAGE_CODE
TIME_ZONE
USE_I18N
USE_TZ
STATIC_URL
STATICFILES_DIRS
WHITENOISE_USE_FINDERS
WHITENOISE_AUTOREFRESH
CACHES
CELERY_BROKER_TRANSPORT
CELERY_BROKER_CONNECTION_TIMEOUT
CELERY_TASK_PUBLISH_RETRY_POLICY
CELERY_TASK_IGNORE_RESULT
CELERY_TASK_ACKS_LATE
CELERY_TASK_REJECT_ON_WORKER_LOST
CELERY_WORKER_PREFETCH_MULTIPLIER
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS
CELERY_WORKER_ENABLE_PREFETCH_COUNT_REDUCTION
CELERY_TASK_SERIALIZER
CELERY_ACCEPT_CONTENT
REALICU_AGREEMENT_CATCH_UP
REALICU_IMPORT_ROOTS
REALICU_IMPORT_BATCH_STAYS
REALICU_ORACLE_CLAIM_LEASE_SECONDS
REALICU_LLM_KEY_ENV_PREFIXES
REALICU_LLM_KEY_ENV_NAMES
REALICU_LLM_BLOCKED_HOSTS
REALICU_APP_ADDRESSES
REALICU_LLM_DEFAULT_CONTEXT_TOKENS
REALICU_LLM_DEFAULT_COMPLETION_TOKENS
REALICU_LLM_PROMPT_MARGIN_TOKENS
REALICU_LLM_TIMEOUT_MAX_SECONDS
SPECTACULAR_SETTINGS
LOGGING
AUTHENTICATION_BACKENDS
AXES_FAILURE_LIMIT
AXES_COOLOFF_TIME
AXES_LOCKOUT_PARAMETERS
SILENCED_SYSTEM_CHECKS
AXES_RESET_ON_SUCCESS
AXES_LOCKOUT_TEMPLATE
AXES_VERBOSE
AUTH_PASSWORD_VALIDATORS
SESSION_COOKIE_AGE
SESSION_EXPIRE_AT_BROWSER_CLOSE
SESSION_COOKIE_HTTPONLY
SESSION_COOKIE_SAMESITE
REALICU_ENDPOINT_ALLOWED_NETWORKS
REALICU_APP_SERVICE_NAMES
SECURE_PROXY_SSL_HEADER
CSRF_COOKIE_SECURE
SECURE_SSL_REDIRECT
SECURE_HSTS_SECONDS
SECURE_HSTS_INCLUDE_SUBDOMAINS
SECURE_HSTS_PRELOAD
SECURE_CONTENT_TYPE_NOSNIFF
SECURE_REFERRER_POLICY
X_FRAME_OPTIONS
CONTENT_SECURITY_POLICY
# uvicorn worker class named in gunicorn.conf.py
Worker  # realicu_web/webserver.py
CONFIG_KWARGS  # realicu_web/webserver.py
_.limit_concurrency  # realicu_web/webserver.py
# used by apps vulture is not given here (annotation, oracle, windows/importers)
physician_required  # accounts/access.py, annotation views
judge_required  # accounts/access.py, annotation/views_calibration.py
MAX_INT32  # accounts/ids.py, annotation/views_calibration.py
IdMultipleChoiceField  # accounts/ids.py, annotation/forms.py
attestations_active  # datause/selectors.py, oracle/egress.py
egress_decision_record  # datause/services.py, oracle/egress.py
stays_link  # windows/datasources.py, windows/importers
# Django path converter protocol
regex  # accounts/ids.py
_.to_url  # accounts/ids.py
# model fields set by a service
_.revoked_by  # datause/services.py
_.pilot_probability  # oracle/models.py GoldInclusion: read by name (values_list)
other_runs  # oracle/forms.py GoldDrawForm: a form field, read from cleaned_data
# dataclass fields and dict keys read by templates, manifests or by name
definition  # surveillance/checkpoints.py
antibiotic_time  # windows/concepts/sepsis.py
culture_time  # windows/concepts/sepsis.py
billed  # windows/presentation.py
css  # windows/presentation.py
kind_label  # windows/presentation.py
note_head  # windows/presentation.py
note_rest  # windows/presentation.py
first_hours  # windows/presentation.py: the stay page's window strip axis
last_hours  # windows/presentation.py
code_status  # windows/selectors.py
# agents, oracle, gunicorn, benchmarks and the importers (issue 37)
OnlineEndpointAdmin  # agents/admin.py
AgentsConfig  # agents/apps.py
FULL  # agents/models.py: a context mode's choice, stored as its value
stays_done  # agents/models.py: shown on the run page
error_detail  # agents/models.py: shown to admins on the run page
agent_stay_task  # agents/tasks.py: Celery task, sent by name
oracle_validation_task  # oracle/tasks.py: Celery task, sent by name
_.log_message  # loopback/__init__.py (QuietHandler): BaseHTTPRequestHandler hook
_.do_POST  # benchmarks/agents_bench.py: BaseHTTPRequestHandler hook
_.prompt_chars_per_token  # benchmarks/agents_bench.py: read by agents.llm
wsgi_app  # gunicorn.conf.py: gunicorn setting
worker_class  # gunicorn.conf.py
keepalive  # gunicorn.conf.py
graceful_timeout  # gunicorn.conf.py
PromptTemplateAdmin  # oracle/admin.py
BackboneAdmin  # oracle/admin.py
OracleRunAdmin  # oracle/admin.py
OracleLabelAdmin  # oracle/admin.py
ValidationReportAdmin  # oracle/admin.py
ValidationJobAdmin  # oracle/admin.py
OracleConfig  # oracle/apps.py
_.connect_unix_socket  # oracle/backbones/http.py: httpcore network backend hook
_.clean_base_url  # oracle/forms.py: Django form hook
_.clean_parameters  # oracle/forms.py: Django form hook
OLLAMA  # oracle/models.py: a schema dialect's choice, stored as its value
NONE  # oracle/models.py: a schema dialect's choice, stored as its value
acute_problems_f1  # oracle/models.py: report columns read by the promotion gate
recommended_actions_f1  # oracle/models.py
red_flags_f1  # oracle/models.py
rating_label  # oracle/selectors_labels.py: read by templates/oracle/run_label.html
_.analyzed  # windows/importers/writing.py: its ANALYZE count (a test reads it)
# The evaluation library's public entry to the alpha the IRR dashboard computes
# batched (evaluation.agreement): its tests check the formula against
# Krippendorff (2011) and the krippendorff package.
krippendorff_alpha  # evaluation/agreement.py

# The standard library's servers and parsers call these hooks by name
# (loopback/: the tests' and benchmarks' loopback servers; the run-page reader
# of benchmarks/_llm_bench.py).
_.do_GET  # http.server.BaseHTTPRequestHandler
daemon_threads  # socketserver.ThreadingMixIn
request_queue_size  # socketserver.TCPServer
_.handle_starttag  # html.parser.HTMLParser
_.handle_endtag  # html.parser.HTMLParser
_.handle_data  # html.parser.HTMLParser

# Python calls a module's __getattr__ for a name the module lacks (PEP 562):
# windows/concepts/__init__.py names EVENT_COLUMNS without importing pandas.
__getattr__
