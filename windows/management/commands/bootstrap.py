"""manage.py bootstrap: everything `make run` needs before serving: migrate,
collect the static files (compressed),
import the CLIF demo cohort on the first run (with its windows and concept
tracks), select its default cohort of 94 stays, create the demo accounts.
With --skip-demo (production): migrate, and create the admin named by
REALICU_ADMIN_USERNAME / REALICU_ADMIN_PASSWORD if given; no demo data, no demo
accounts, no password printed."""

from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import BaseCommand

from accounts.commands import service_refusals
from accounts.provisioning import (
    admin_from_environment_ensure,
    demo_accounts_ensure,
    demo_passwords_check,
)
from windows.cohort import cohort_build
from windows.models import Admission, Cohort, Source

DEMO_COHORT = "CLIF demo"


class Command(BaseCommand):
    help = "Migrate, import the CLIF demo on first run, create demo accounts."

    def add_arguments(self, parser):
        parser.add_argument(
            "--skip-demo",
            action="store_true",
            help="Production: no CLIF demo cohort and no demo accounts; "
            "an admin from REALICU_ADMIN_USERNAME and "
            "REALICU_ADMIN_PASSWORD if set.",
        )

    def handle(self, *args, skip_demo=False, **options):
        if not skip_demo:
            with service_refusals():
                demo_passwords_check()
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("Database migrated.")
        # Hashed, gzip-compressed static files for WhiteNoise (a few seconds;
        # unchanged files are skipped).
        call_command("collectstatic", interactive=False, verbosity=0)
        self.stdout.write("Static files collected.")
        if skip_demo:
            self._production_admin_ensure()
            return
        if Admission.objects.filter(source=Source.CLIF).exists():
            self.stdout.write("CLIF demo already imported; skipping the import.")
        else:
            self.stdout.write("Importing the CLIF demo cohort (first run only)...")
            call_command("import_clif", stdout=self.stdout, stderr=self.stderr)
            self.stdout.write("Building windows, Gold sample and concept tracks...")
            # In this process (make run may have no worker yet).
            call_command(
                "build_windows",
                all=True,
                inline=True,
                stdout=self.stdout,
                stderr=self.stderr,
            )
            call_command(
                "build_concepts", inline=True, stdout=self.stdout, stderr=self.stderr
            )
        if Admission.objects.filter(source=Source.CLIF).exists():
            self._demo_cohort_ensure()
        with service_refusals():
            created = demo_accounts_ensure()
        if created:
            self.stdout.write(
                self.style.WARNING(
                    "Demo accounts created. Passwords are shown only now; set "
                    "REALICU_*_PASSWORD before the first run to choose them:"
                )
            )
            for username, role, password in created:
                self.stdout.write(f"  {username:<12} {role:<11} {password}")

    def _production_admin_ensure(self):
        with service_refusals():
            username = admin_from_environment_ensure()
        if username:
            self.stdout.write(
                f"Admin {username!r} created from REALICU_ADMIN_USERNAME."
            )
        else:
            self.stdout.write(
                "No demo accounts (--skip-demo). Without an admin yet, create one: "
                "manage.py createsuperuser, or set REALICU_ADMIN_USERNAME and "
                "REALICU_ADMIN_PASSWORD for this job."
            )

    def _demo_cohort_ensure(self):
        """The demo's default cohort (spec section 2's settings), for the
        Oracle's and the campaigns' forms: built once, kept as it is after."""
        if Cohort.objects.filter(name=DEMO_COHORT).exists():
            return
        try:
            cohort = cohort_build(name=DEMO_COHORT, target_size=94, seed=0)
        except ValidationError as exc:
            self.stdout.write(
                self.style.WARNING(
                    "The demo cohort was not built: " + "; ".join(exc.messages)
                )
            )
            return
        self.stdout.write(
            f"Demo cohort {cohort.pk} {cohort.name!r}: {cohort.summary['size']} stays."
        )
