"""flowsim: a flow-level network model of GPU clusters.

Flows share directed links with weighted max-min fairness; see the README's "Model"
section for the contract.
"""

from flowsim.errors import InputError
from flowsim.fairshare import FairShareProblem, max_min_rates
from flowsim.routes import Routes

__version__ = "0.1.0"

__all__ = ["FairShareProblem", "InputError", "Routes", "max_min_rates", "__version__"]
