"""Metrics, light (numpy only): importable by ensembling and EDA without torch."""

from __future__ import annotations

import numpy as np


def rmse(y, p) -> float:
    """Root mean squared error."""
    return float(np.sqrt(np.mean((np.asarray(y, float) - np.asarray(p, float)) ** 2)))
