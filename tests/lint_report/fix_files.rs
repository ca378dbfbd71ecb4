//! `lint --fix` edits files as a careful editor saves them: the real
//! binary on real files, each reproduction of what a careless rewrite did
//! (modes widened, read-only files rewritten, symbolic links replaced, a
//! predictable temporary file followed or deleted, a byte-order mark
//! dropped). A file edited while the fix runs is kept as edited:
//! `fix::tests::a_file_changed_after_it_was_read_keeps_its_new_text`
//! makes that window deterministic.

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;
use std::process::{Command, Output};

const BAD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/lint/windows-bad.yaml"
);

fn fix(file: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_winadmit"))
        .args(["lint", "--fix", file.to_str().unwrap()])
        .env_remove("WINADMIT_POLICY")
        .env("NO_COLOR", "1")
        .output()
        .expect("runs winadmit")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

fn is_fixed(text: &str) -> bool {
    !text.contains("NET_ADMIN") && !text.contains("privileged")
}

#[test]
fn modes_are_kept_and_read_only_files_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    for m in [0o600, 0o640, 0o755] {
        let file = dir.path().join(format!("web-{m:o}.yaml"));
        std::fs::copy(BAD, &file).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(m)).unwrap();
        let out = fix(&file);
        assert!(
            is_fixed(&std::fs::read_to_string(&file).unwrap()),
            "{}",
            stderr(&out)
        );
        assert_eq!(mode(&file), m, "mode {m:o} kept");
    }
    let file = dir.path().join("read-only.yaml");
    std::fs::copy(BAD, &file).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o444)).unwrap();
    let out = fix(&file);
    assert_eq!(
        std::fs::read(&file).unwrap(),
        std::fs::read(BAD).unwrap(),
        "a read-only file is not rewritten"
    );
    assert_eq!(mode(&file), 0o444);
    assert!(
        stderr(&out).contains("read-only.yaml: is read-only (mode 444); not fixed"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn owner_and_group_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("web.yaml");
    std::fs::copy(BAD, &file).unwrap();
    let me = std::fs::metadata(&file).unwrap();
    // Root can give the file away first; anyone else checks their own.
    let (uid, gid) = if me.uid() == 0 {
        std::os::unix::fs::chown(&file, Some(4242), Some(4343)).unwrap();
        (4242, 4343)
    } else {
        (me.uid(), me.gid())
    };
    let out = fix(&file);
    assert!(
        is_fixed(&std::fs::read_to_string(&file).unwrap()),
        "{}",
        stderr(&out)
    );
    let after = std::fs::metadata(&file).unwrap();
    assert_eq!((after.uid(), after.gid()), (uid, gid));
}

#[test]
fn a_symbolic_link_is_followed_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let target = real.join("web.yaml");
    std::fs::copy(BAD, &target).unwrap();
    let link = dir.path().join("web.yaml");
    std::os::unix::fs::symlink("real/web.yaml", &link).unwrap();
    let out = fix(&link);
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link stays a link"
    );
    assert_eq!(
        std::fs::read_link(&link).unwrap(),
        Path::new("real/web.yaml")
    );
    assert!(
        is_fixed(&std::fs::read_to_string(&target).unwrap()),
        "the target is fixed: {}",
        stderr(&out)
    );
    // The temporary file was made beside the target, and is gone.
    assert_eq!(std::fs::read_dir(&real).unwrap().count(), 1);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

#[test]
fn a_planted_or_existing_file_at_the_old_temporary_name_is_never_touched() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("someone-elses.txt");
    std::fs::write(&victim, "not yours\n").unwrap();
    // Another user plants a link where a predictable name would be.
    let file = dir.path().join("web.yaml");
    std::fs::copy(BAD, &file).unwrap();
    let planted = dir.path().join("web.winadmit-fix.tmp");
    std::os::unix::fs::symlink(&victim, &planted).unwrap();
    let out = fix(&file);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "not yours\n");
    assert!(
        std::fs::symlink_metadata(&planted)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let meta = std::fs::symlink_metadata(&file).unwrap();
    assert!(meta.file_type().is_file(), "the manifest is a regular file");
    assert!(
        is_fixed(&std::fs::read_to_string(&file).unwrap()),
        "{}",
        stderr(&out)
    );

    // A user's own file of that name stays.
    let other = dir.path().join("app.yaml");
    std::fs::copy(BAD, &other).unwrap();
    let own = dir.path().join("app.winadmit-fix.tmp");
    std::fs::write(&own, "my notes\n").unwrap();
    fix(&other);
    assert_eq!(std::fs::read_to_string(&own).unwrap(), "my notes\n");
    assert!(is_fixed(&std::fs::read_to_string(&other).unwrap()));
    // Nothing else is left in the directory.
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "app.winadmit-fix.tmp",
            "app.yaml",
            "someone-elses.txt",
            "web.winadmit-fix.tmp",
            "web.yaml"
        ]
    );
}

#[test]
fn a_byte_order_mark_and_crlf_line_endings_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("web.yaml");
    let text = std::fs::read_to_string(BAD).unwrap().replace('\n', "\r\n");
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend_from_slice(text.as_bytes());
    std::fs::write(&file, &bytes).unwrap();
    let out = fix(&file);
    let after = std::fs::read(&file).unwrap();
    assert!(after.starts_with(b"\xEF\xBB\xBF"), "the BOM stays");
    let after = String::from_utf8(after[3..].to_vec()).unwrap();
    assert!(is_fixed(&after), "{}", stderr(&out));
    assert!(
        !after.replace("\r\n", "").contains('\n'),
        "every line ends in CRLF: {after:?}"
    );
}

#[test]
fn a_file_with_other_hard_links_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("web.yaml");
    std::fs::copy(BAD, &file).unwrap();
    std::fs::hard_link(&file, dir.path().join("also.yaml.bak")).unwrap();
    let out = fix(&file);
    assert_eq!(std::fs::read(&file).unwrap(), std::fs::read(BAD).unwrap());
    assert!(
        stderr(&out).contains("has 2 hard links"),
        "{}",
        stderr(&out)
    );
}
