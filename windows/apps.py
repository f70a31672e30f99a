from django.apps import AppConfig


class WindowsConfig(AppConfig):
    name = "windows"
    verbose_name = "Clinical data and windows"

    def ready(self):
        from jobs.registry import JobKind, register
        from windows.import_batches import import_batch_reaped
        from windows.models import BuildState, ImportStatus

        # An import whose worker went silent is queued again: the importers skip
        # what a previous attempt committed, so running it again completes it.
        register(
            JobKind(
                name="import",
                model="windows.ImportRun",
                task="windows.tasks.import_run_execute_task",
                states=ImportStatus,
                state_field="status",
            )
        )
        # A batch of a tracks or windows build whose worker went silent is queued
        # again: its stays' work replaces what it writes (windows.builds).
        register(
            JobKind(
                name="build",
                model="windows.BuildBatch",
                task="windows.tasks.build_batch_execute_task",
                states=BuildState,
            )
        )
        # A batch of a fanned-out MIMIC-IV import whose worker went silent is
        # queued again: its rows and its done state commit together, so it is
        # imported once (windows.import_batches).
        register(
            JobKind(
                name="import-batch",
                model="windows.ImportBatch",
                task="windows.tasks.import_batch_execute_task",
                states=BuildState,
                cleanup=import_batch_reaped,
            )
        )
