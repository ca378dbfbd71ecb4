//! Readers of input: they turn bytes into the values the decision reads.
//! [`yaml`] parses YAML into JSON values with the line of every field,
//! [`source`] lists and reads manifest files and streams for `lint` and
//! `report --from-file`, [`policy`] reads policy files, [`facts`] reads an
//! image facts file, and [`registry`] asks OCI registries what an image is
//! built for. Modules here import only `decision` and `input`.

pub mod facts;
pub mod policy;
pub mod registry;
pub mod source;
pub mod yaml;
