//! The kube layer against a mocked apiserver.

mod kube;
