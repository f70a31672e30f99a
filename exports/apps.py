from django.apps import AppConfig


def _release_cleanup(release) -> None:
    """The reaper found the build's worker gone: its unfinished folder goes
    (the next attempt starts a new one; a failed build leaves nothing)."""
    from exports.building import release_partial_remove

    release_partial_remove(release)


class ExportsConfig(AppConfig):
    name = "exports"

    def ready(self) -> None:
        from exports.models import ReleaseState, SubmissionState
        from jobs.registry import JobKind, register

        register(
            JobKind(
                name="release",
                model="exports.Release",
                task="exports.tasks.release_build_task",
                states=ReleaseState,
                running=ReleaseState.BUILDING,
                cleanup=_release_cleanup,
            )
        )
        register(
            JobKind(
                name="submission",
                model="exports.Submission",
                task="exports.tasks.submission_score_task",
                states=SubmissionState,
                running=SubmissionState.SCORING,
                finished_field=None,  # scored_at means scored
            )
        )
