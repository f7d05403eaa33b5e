"""Which AWS region a command acts in, and where that came from: one rule for the CLI, doctor and the CDK app.

The CDK CLI, which deploys the stack, takes ``AWS_REGION``, then ``AWS_DEFAULT_REGION``, then the
profile's region; boto3 reads only the last two. Left to boto3, a user who sets ``AWS_REGION`` alone
gets "no region", and one who also has a profile region deploys into one region and runs sweeps in
another ("stack not found"). Every command therefore resolves the region here, in the CDK CLI's order,
after what the command line and the spec name, and says which source it used.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from trainsweep.errors import TrainsweepError

ENV_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")
"""Read in this order, as the CDK CLI reads them."""
CDK_REGION_ENV = "CDK_DEFAULT_REGION"
"""The region the CDK CLI resolved (it sets this for the app it runs)."""
FLAG = "--region"
SPEC = "the spec's region"
NO_REGION = (
    "no AWS region configured: pass --region, set AWS_REGION (as `cdk deploy` reads it), "
    "or give the profile a region (`aws configure set region REGION`)"
)


@dataclass(frozen=True)
class RegionChoice:
    """A region (None: none configured) and where it came from (``--region``, ``AWS_REGION``, ...)."""

    region: str | None
    source: str

    def describe(self) -> str:
        return f"{self.region} (from {self.source})" if self.region else "none configured"


def profile_region(profile: str | None) -> str | None:
    """The region of the profile (``profile``, else ``AWS_PROFILE``, else ``default``) in the AWS config
    files; raises botocore's ProfileNotFound for a profile that does not exist."""
    import botocore.session

    session = botocore.session.Session(profile=profile)
    region = session.get_scoped_config().get("region")
    return str(region) if region else None


def _profile_label(profile: str | None, environ: Mapping[str, str]) -> str:
    name = profile or environ.get("AWS_PROFILE") or "default"
    return f"profile {name!r}"


def resolve_region(
    explicit: str | None = None,
    *,
    spec_region: str | None = None,
    profile: str | None = None,
    environ: Mapping[str, str] | None = None,
    read_profile: Callable[[str | None], str | None] = profile_region,
) -> RegionChoice:
    """The region a command acts in: ``--region``, the spec's ``region``, ``AWS_REGION``,
    ``AWS_DEFAULT_REGION``, the profile's region; the first that is set."""
    env = os.environ if environ is None else environ
    if explicit:
        return RegionChoice(explicit, FLAG)
    if spec_region:
        return RegionChoice(spec_region, SPEC)
    for name in ENV_VARIABLES:
        if env.get(name):
            return RegionChoice(env[name], name)
    region = read_profile(profile)
    return RegionChoice(region, _profile_label(profile, env)) if region else RegionChoice(None, "nowhere")


def open_session(profile: str | None, region: str | None, *, spec_region: str | None = None) -> Any:
    """A boto3 session in the resolved region (:func:`resolve_region`); ``session.region_source`` says
    where the region came from.

    Raises:
        TrainsweepError: the profile does not exist, or no region is configured anywhere.
    """
    import boto3

    try:
        choice = resolve_region(region, spec_region=spec_region, profile=profile)
        session: Any = boto3.Session(profile_name=profile, region_name=choice.region)
    except Exception as exc:  # ProfileNotFound and friends
        raise TrainsweepError(f"{exc}; list profiles with `aws configure list-profiles`") from exc
    if choice.region is None:
        raise TrainsweepError(NO_REGION)
    session.region_source = choice.source
    return session


def cdk_region_note(environ: Mapping[str, str] | None = None, **kwargs: Any) -> str | None:
    """A warning for the CDK app when the region the CDK CLI deploys to (``CDK_DEFAULT_REGION``) is not the
    one trainsweep's commands would use with the same environment (e.g. ``cdk deploy --profile P``
    without ``AWS_PROFILE``); None when they agree or the CLI did not say."""
    env = os.environ if environ is None else environ
    deploying = env.get(CDK_REGION_ENV)
    if not deploying:
        return None
    try:
        ours = resolve_region(environ=env, **kwargs)
    except Exception:  # an unreadable profile: the CDK CLI will say so itself
        return None
    if ours.region == deploying:
        return None
    return (
        f"warning: cdk deploys into {deploying}, but trainsweep commands run in this environment would act "
        f"in {ours.describe()}: pass --region {deploying} (and the same --profile) to them, or set "
        f"AWS_REGION={deploying}"
    )
