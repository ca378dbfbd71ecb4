//! Tells the end-to-end tests (`tests/e2e_*.rs`) whether they can run:
//! they build kube-apiserver, etcd and kubectl from Go modules
//! (`tests/apiserver/build.sh`), so without Go on PATH they are compiled as
//! ignored, with the reason, rather than shown as passed. With
//! `WINADMIT_REQUIRE_APISERVER` set (CI) they always run, and fail when
//! they cannot build the control plane.
//!
//! The same for the registry tests (`tests/registry.rs`): they start
//! Debian's `docker-registry` (the CNCF distribution registry) and use
//! `htpasswd`; without them on PATH they are ignored, with the reason,
//! unless `WINADMIT_REQUIRE_REGISTRY` is set (CI).

use std::process::Command;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(no_control_plane)");
    println!("cargo::rustc-check-cfg=cfg(no_registry)");
    println!("cargo::rerun-if-env-changed=WINADMIT_REQUIRE_REGISTRY");
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rerun-if-env-changed=WINADMIT_REQUIRE_APISERVER");
    println!("cargo::rerun-if-changed=build.rs");
    let go = Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !go && std::env::var_os("WINADMIT_REQUIRE_APISERVER").is_none() {
        println!("cargo::rustc-cfg=no_control_plane");
    }
    let registry = ["docker-registry", "htpasswd"].iter().all(|tool| {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
    });
    if !registry && std::env::var_os("WINADMIT_REQUIRE_REGISTRY").is_none() {
        println!("cargo::rustc-cfg=no_registry");
    }
}
