"""kaggle-text-kit: attention-pooling transformers for any Kaggle text competition.

Modules: pooling, model, data, config, train (the one loop), predict, ensemble, env, kaggle, plots.
Importing the package is cheap; each module imports what it needs.
"""

__version__ = "0.1.0"
