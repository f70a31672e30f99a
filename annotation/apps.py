from django.apps import AppConfig

# Session key the base template reads to show physicians their queue link,
# without a groups query on every page.
SESSION_IS_PHYSICIAN = "annotation_is_physician"


def _remember_physician_role(sender, request, user, **kwargs):
    from annotation.roles import user_is_physician

    if request is not None and hasattr(request, "session"):
        request.session[SESSION_IS_PHYSICIAN] = user_is_physician(user)


class AnnotationConfig(AppConfig):
    name = "annotation"

    def ready(self):
        from django.contrib.auth.signals import user_logged_in

        user_logged_in.connect(
            _remember_physician_role, dispatch_uid="annotation_physician_role"
        )

        from jobs.registry import JobKind, register

        register(
            JobKind(
                name="agreement-recompute",
                model="annotation.AgreementRecompute",
                task="annotation.tasks.agreement_recompute_task",
                queued="queued",
                running="running",
                failed="failed",
            )
        )
