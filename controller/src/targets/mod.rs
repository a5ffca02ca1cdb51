//! What a task's work means on each kind of target: the steps it runs there (typed requests for
//! the runner) and whether the target may take work now. The task controller stays ignorant of
//! data stores; it asks here.

pub mod etcd;
pub mod scylla;
