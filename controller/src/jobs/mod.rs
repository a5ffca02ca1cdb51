//! The one path from a planned action to a Job of groundskeeper-job, and from its pod back to a result.
