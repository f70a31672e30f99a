"""manage.py build_release (--campaign ID | --oracle-run ID | --kind surveillance
[--cohort ID]) --user NAME [--override-reason TEXT]: build a new version of
RealICU-Gold, RealICU-Scale or the CodeClinic surveillance companion (the
newest cohort unless --cohort) here, with a progress line.

The release is queued as the page queues it (its task recorded in the same
transaction), then taken here with the same lease a worker takes: if a worker
takes it first, this follows the worker's progress on the row instead; if this
process is killed, the reaper gives the build to a worker."""

import time

from django.core.management.base import BaseCommand, CommandError

from accounts.commands import command_row, command_user, service_refusals
from annotation.models import Campaign
from exports.building import release_build, release_folder
from exports.models import Release, ReleaseKind, ReleaseState
from exports.services import gold_open_windows_warning, release_create
from jobs.progress import ConsoleProgress, Progress, command_stream
from oracle.models import OracleRun
from windows.models import Cohort


class Command(BaseCommand):
    # The system checks import every URLconf and so every view (pandas and the
    # concept tracks with them): most of the command's start-up, for a build
    # that serves nothing. migrate and the server run them (issue 20).
    requires_system_checks = []
    help = (
        "Build a new, immutable release version: RealICU-Gold from a campaign's "
        "consensus, or RealICU-Scale from a validated Oracle run."
    )

    def add_arguments(self, parser):
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--campaign", type=int, help="Gold campaign id.")
        source.add_argument("--oracle-run", type=int, help="Validated Oracle run id.")
        source.add_argument(
            "--kind",
            choices=[ReleaseKind.SURVEILLANCE],
            help="surveillance: checkpoint labels of a cohort's stays (spec 10).",
        )
        parser.add_argument(
            "--cohort", type=int, help="Surveillance: cohort id (default newest)."
        )
        parser.add_argument(
            "--user", required=True, help="Username of the admin who builds it."
        )
        parser.add_argument("--notes", default="")
        parser.add_argument(
            "--override-reason",
            default="",
            help="Scale only: promote although the validation figures are below the "
            "promotion thresholds, for this reason (recorded and written into the "
            "manifest, as on the promote page).",
        )

    def handle(
        self,
        *args,
        campaign=None,
        oracle_run=None,
        kind=None,
        cohort=None,
        user=None,
        notes="",
        override_reason="",
        **options,
    ):
        admin = command_user(user, option="--user", recorded="the release")
        with service_refusals():
            if kind == ReleaseKind.SURVEILLANCE:
                if cohort is not None:
                    found = command_row(Cohort, cohort, "cohort")
                else:
                    found = Cohort.objects.order_by("-created_at", "-pk").first()
                    if found is None:
                        raise CommandError(
                            "No cohort yet: build one first (manage.py build_cohort)."
                        )
                release = release_create(
                    user=admin,
                    kind=ReleaseKind.SURVEILLANCE,
                    cohort=found,
                    notes=notes,
                )
            elif campaign is not None:
                if override_reason:
                    raise CommandError(
                        "--override-reason is for Scale releases; a Gold release has "
                        "no promotion thresholds."
                    )
                found = command_row(Campaign, campaign, "campaign")
                release = release_create(
                    user=admin, kind=ReleaseKind.GOLD, campaign=found, notes=notes
                )
                warning = gold_open_windows_warning(found)
                if warning:
                    self.stderr.write(f"Warning: {warning}")
            else:
                release = release_create(
                    user=admin,
                    kind=ReleaseKind.SCALE,
                    oracle_run=command_row(OracleRun, oracle_run, "Oracle run"),
                    notes=notes,
                    override_reason=override_reason,
                )
            console = ConsoleProgress(stream=command_stream(self))
            release = release_build(release=release, progress=Progress(sinks=[console]))
            while release.state in (ReleaseState.QUEUED, ReleaseState.BUILDING):
                # A worker took it first: its progress is on the row.
                console(
                    release.progress_done,
                    release.progress_total,
                    release.progress_label,
                )
                time.sleep(1)
                release = Release.objects.get(pk=release.pk)
        if release.state != ReleaseState.READY:
            raise CommandError(
                f"{release} (id {release.pk}) is {release.get_state_display().lower()}"
                f": {release.error}"
            )
        unit = "checkpoints" if release.kind == ReleaseKind.SURVEILLANCE else "windows"
        self.stdout.write(
            f"{release} (id {release.pk}): {release.window_count} {unit} in "
            f"{release_folder(release)}"
        )
