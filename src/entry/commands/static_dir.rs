//! Writing a static admission configuration directory (`--static DIR` of
//! `winadmit manifests` and `winadmit admission-policy`).
//!
//! kube-apiserver watches each plugin's directory and reloads it when a
//! file changes, so every file is written whole under a name the loader
//! skips (`.NAME.tmp`) and renamed into place: the API server never reads a
//! half-written file. A file whose content is unchanged is left alone, and
//! the command's own files (`*.static.k8s.io.yaml`) that it no longer
//! generates are removed. `admission-configuration.yaml` names every
//! plugin directory that holds files, so both commands can write into the
//! same DIR.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

use crate::entry::static_admission::{self, ADMISSION_CONFIGURATION, File, Plugin, SUFFIX};

/// Writes `files` into `dir` and the `AdmissionConfiguration` naming the
/// plugin directories as `host_dir` (default: `dir`'s absolute path).
/// The command's own files in the directories of `owned` (its plugins)
/// that it no longer generates are removed: regenerated with
/// `--no-mutating`, the mutating policy is gone. Returns the path of the
/// `AdmissionConfiguration`.
///
/// # Errors
/// A `host_dir` that is not absolute, or a directory or file that cannot
/// be written.
pub fn write(
    dir: &Path,
    host_dir: Option<&str>,
    owned: &[Plugin],
    files: &[File],
) -> anyhow::Result<PathBuf> {
    let host_dir = match host_dir {
        Some(h) if h.starts_with('/') => h.to_owned(),
        Some(h) => bail!(
            "--static-host-dir {h:?}: kube-apiserver needs an absolute path for staticManifestsDir"
        ),
        None => std::path::absolute(dir)
            .with_context(|| format!("--static {}", dir.display()))?
            .display()
            .to_string(),
    };
    let plugins: BTreeSet<Plugin> = files
        .iter()
        .map(|f| f.plugin)
        .chain(owned.iter().copied())
        .collect();
    for plugin in &plugins {
        let sub = dir.join(plugin.dir());
        // An owned plugin with nothing to write: only stale files to remove.
        if !sub.is_dir() && !files.iter().any(|f| f.plugin == *plugin) {
            continue;
        }
        std::fs::create_dir_all(&sub).with_context(|| format!("creating {}", sub.display()))?;
        let mine: Vec<&File> = files.iter().filter(|f| f.plugin == *plugin).collect();
        for f in &mine {
            let yaml = crate::entry::manifests::to_yaml(&f.objects)
                .with_context(|| format!("serializing {}", f.name))?;
            replace(&sub.join(&f.name), yaml.as_bytes())?;
        }
        let keep: BTreeSet<&str> = mine.iter().map(|f| f.name.as_str()).collect();
        for entry in
            std::fs::read_dir(&sub).with_context(|| format!("reading {}", sub.display()))?
        {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(&format!("{SUFFIX}.yaml")) && !keep.contains(name.as_str()) {
                std::fs::remove_file(entry.path())
                    .with_context(|| format!("removing {}", entry.path().display()))?;
            }
        }
    }
    // Every plugin directory that holds files: the other command's too.
    let present: Vec<Plugin> = Plugin::ALL
        .into_iter()
        .filter(|p| holds_files(&dir.join(p.dir())))
        .collect();
    let config = static_admission::admission_configuration(&host_dir, &present);
    let path = dir.join(ADMISSION_CONFIGURATION);
    let yaml = crate::entry::manifests::to_yaml(std::slice::from_ref(&config))
        .context("serializing the AdmissionConfiguration")?;
    replace(&path, yaml.as_bytes())?;
    Ok(path)
}

fn holds_files(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            !name.starts_with('.')
                && [".yaml", ".yml", ".json"]
                    .iter()
                    .any(|ext| name.ends_with(ext))
        })
    })
}

/// Writes `path` whole, by a rename; leaves it alone when it already holds
/// `content`.
fn replace(path: &Path, content: &[u8]) -> anyhow::Result<()> {
    if std::fs::read(path).is_ok_and(|old| old == content) {
        return Ok(());
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&tmp, content).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// What the command tells its user once the files are written.
pub fn report(config: &Path, files: &[File]) {
    let plugins: BTreeSet<&str> = files.iter().map(|f| f.plugin.dir()).collect();
    eprintln!(
        "winadmit: wrote {} file(s) into {}; start kube-apiserver with --admission-control-config-file={} (see docs/install.md, \"Static admission configuration\")",
        files.len(),
        plugins.into_iter().collect::<Vec<_>>().join(", "),
        std::path::absolute(config)
            .unwrap_or_else(|_| config.to_path_buf())
            .display()
    );
}
