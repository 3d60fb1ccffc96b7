//! Several replicas deciding at once: the live replica set, its partition of the nodes, and
//! what each replica carries of the others' choices.

pub(crate) mod replica;
