from django.apps import AppConfig


class WindowsConfig(AppConfig):
    name = "windows"
    verbose_name = "Clinical data and windows"

    def ready(self):
        from django.contrib.auth.signals import user_logged_in

        from jobs.registry import JobKind, register
        from windows.accounts import session_renewed_mark
        from windows.models import ImportStatus

        user_logged_in.connect(session_renewed_mark, dispatch_uid="session_renewed_mark")
        # An import whose worker went silent is queued again: the importers skip
        # what a previous attempt committed, so running it again completes it.
        register(
            JobKind(
                name="import",
                model="windows.ImportRun",
                task="windows.tasks.import_run_execute_task",
                queued=ImportStatus.QUEUED,
                running=ImportStatus.RUNNING,
                failed=ImportStatus.FAILED,
                state_field="status",
            )
        )
