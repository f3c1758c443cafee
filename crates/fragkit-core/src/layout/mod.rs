//! What is on disk: extent maps (FIEMAP), the file-system facts they need, the model
//! fragments are defined on, and the tree walk that maps many files.

pub mod model;
pub mod walk;
