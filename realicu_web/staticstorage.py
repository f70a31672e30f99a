"""Static files under hashed names with gzip copies (WhiteNoise), once
collectstatic has run (bootstrap runs it; so does the image's build)."""

from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticFilesStorage(CompressedManifestStaticFilesStorage):
    """WhiteNoise's compressed manifest storage, with the plain name for a file
    not collected yet (the test suite, a checkout before bootstrap), which
    WhiteNoise's finders then serve as it is."""

    manifest_strict = False

    def stored_name(self, name: str) -> str:
        try:
            return super().stored_name(name)
        except ValueError:
            return name
