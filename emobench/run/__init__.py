"""The batch layer: how a run is scheduled, preflighted, resumed, merged, re-scored and finalized."""
