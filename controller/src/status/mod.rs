//! Status conditions: merged into lists other controllers share, written apart from the decisions.
