//! What is on disk: extent maps (FIEMAP), the file-system facts they need, the model
//! fragments are defined on, and the tree walk that maps many files.

pub mod btrfs_space;
pub mod fiemap;
pub mod fsinfo;
pub mod fsmap;
pub mod model;
pub mod superblock;
pub mod walk;
