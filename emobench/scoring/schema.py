"""Arrow schema of scores.parquet: one row per episode, written by the runner, read by publish."""

from __future__ import annotations

import pyarrow as pa

# 3: affect tracker, situation valence; 4: scoring_profile, epmq_empa, oscillation, success null when unjudged;
# 5: language, trackers_absent
SCORES_SCHEMA_VERSION = "5"

_f64 = pa.float64()

SCORES_SCHEMA = pa.schema(
    [
        # identity and slicing
        ("run_id", pa.string()),
        ("subject", pa.string()),  # role label of the model under test, e.g. "vllm:smollm2"
        ("case_id", pa.string()),
        ("scenario_id", pa.string()),
        ("persona_id", pa.string()),
        ("seed", pa.int64()),
        ("split", pa.string()),
        ("language", pa.string()),  # en|zh: the case's, and so its prompts' and judges'
        ("category", pa.string()),  # life|health|leisure|values|relations|career
        ("dominant_axis", pa.string()),  # C|A|P
        ("difficulty", pa.string()),  # easy|medium|hard|very_hard
        ("threshold", pa.string()),  # low|medium|high
        ("valence", pa.string()),  # negative|mixed|positive: what the situation is about
        ("p0_norm", _f64),
        # episode outcome
        ("n_turns", pa.int64()),
        ("n_judged_turns", pa.int64()),
        ("n_invalid_judgements", pa.int64()),
        ("stop_reason", pa.string()),
        ("success", pa.bool_()),  # null when no turn has a valid judgement
        ("turns_to_success", pa.int64()),  # null unless success
        ("failure_type", pa.string()),  # collapse|stagnation_regression|oscillation|null
        # EPM-Q (docs/method.md §5.4) under the row's scoring_profile (§5.8); in [0, 100] under
        # `emobench`, unbounded above under `empa`
        ("scoring_profile", pa.string()),  # emobench|empa
        ("epmq", _f64),
        ("epmq_empa", _f64),  # the same episode scored under the `empa` profile
        ("outcome", _f64),
        ("efficiency", _f64),
        ("stability", _f64),
        ("rdi", _f64),
        ("etot", _f64),
        ("snet", _f64),
        ("rho", _f64),
        ("sproj", _f64),
        ("tau", _f64),
        ("rpos", _f64),
        ("align", _f64),
        ("pen", _f64),
        ("energy", _f64),  # raw EPM E, for the judge-Empathy correlation
        ("epm_path", pa.list_(pa.list_(_f64))),  # P_0..P_T as [C, A, P]
        # meter tracker
        ("final_meter", _f64),
        ("meter_slope", _f64),
        # holistic rubric, mean over valid judges (null when no judge was valid)
        ("empathy", _f64),
        ("humanlikeness", _f64),
        ("persona_adaptation", _f64),
        ("coherence", _f64),
        # persona probe (docs/method.md §5.6): accuracy in [0, 1], null when not run or never valid
        ("probe_accuracy", _f64),
        ("probe_need_correct", pa.bool_()),
        # affect tracker over the user turns (docs/trackers.md); null when the episode has none
        ("valence_path", pa.list_(_f64)),  # per-turn valence in [-1, 1], every user turn
        ("valence_first", _f64),  # mean valence, first third of the measured turns
        ("valence_last", _f64),  # ... last third; trailing closing pleasantries left out
        ("valence_slope", _f64),  # least-squares slope per turn over the measured turns
        ("closing_turns", pa.int64()),  # trailing thanks/goodbye turns left out of the end point
        ("emotion_first", pa.string()),
        ("emotion_last", pa.string()),
        ("emotion_path", pa.list_(pa.string())),  # strongest emotion per turn, or "neutral"
        ("tracker_version", pa.string()),  # affect head and closing patterns, with their hashes
        # why the affect columns are null by design: the trackers do not read the episode's
        # language (trackers/languages.py); null where they ran
        ("trackers_absent", pa.string()),
        # simulator audit flags (reported, never part of the subject's score)
        ("audit_flags", pa.int64()),
        ("panel", pa.string()),
        # provenance
        ("registry_version", pa.string()),
        ("config_hash", pa.string()),
        ("emobench_version", pa.string()),
    ]
)
