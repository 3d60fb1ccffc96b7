//! The commands besides `serve`, each as a library function `main` calls: `review` (one
//! AdmissionReview, with `--explain`), `simulate` (a burst on the cluster, with its picture),
//! `hotspots` (the hot nodes now) and `certs` (a serving certificate for the webhook).

pub mod certs;
pub mod hotspots;
pub mod review;
pub mod simulate;
