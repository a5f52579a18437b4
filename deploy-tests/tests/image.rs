//! Builds the container image from the repository's Dockerfile (its `runtime` stage)
//! and runs every binary it carries with `--help`, as its non-root user, where a
//! container engine (docker, podman or buildah) works. Elsewhere the test prints
//! `SKIPPED: …` with the reason and passes, unless `DMKV_REQUIRE_IMAGE=1`, when it
//! fails. The build compiles the workspace in release mode: minutes, not seconds.

use deploy_tests::image::{
    ENGINES, IMAGE_UID, RUNTIME_STAGE, copied_binaries, find_engine, image_required,
};
use deploy_tests::root;

#[test]
fn image_builds_and_its_binaries_start() {
    let dockerfile = std::fs::read_to_string(root().join("Dockerfile")).expect("the Dockerfile");
    let binaries = copied_binaries(&dockerfile).expect("the Dockerfile's binaries");
    assert!(binaries.iter().any(|b| b == "metadata"), "{binaries:?}");
    let engine = match find_engine(&ENGINES) {
        Ok(engine) => engine,
        Err(why) => {
            let reason = format!("no container engine works here to build the image ({why})");
            assert!(!image_required(), "DMKV_REQUIRE_IMAGE=1 but {reason}");
            eprintln!("SKIPPED: {reason}; set DMKV_REQUIRE_IMAGE=1 to make that a failure");
            return;
        }
    };
    let tag = format!("dmkv-image-test:{}", std::process::id());
    let result = (|| -> Result<(), String> {
        engine.build(&root(), RUNTIME_STAGE, &tag)?;
        for bin in &binaries {
            let out = engine.run_in(&tag, &[bin.as_str(), "--help"])?;
            if !out.contains("Usage:") {
                return Err(format!("`{bin} --help` printed no usage:\n{out}"));
            }
        }
        let uid = engine.run_in(&tag, &["id", "-u"])?;
        if uid.trim() != IMAGE_UID {
            return Err(format!("the image runs as {uid:?}, not {IMAGE_UID}"));
        }
        Ok(())
    })();
    engine.remove_image(&tag);
    if let Err(e) = result {
        panic!("{} ({}): {e}", engine.program, tag);
    }
}
