//! The flags every command that judges files shares for `PolicyException`s.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct ExceptionArgs {
    /// A directory of `PolicyException` objects (YAML or JSON), beside
    /// those in the input.
    #[arg(long = "exceptions", value_name = "DIR", env = "WINADMIT_EXCEPTIONS")]
    pub dir: Option<PathBuf>,
    /// The instant exceptions are judged at (RFC 3339, like
    /// 2026-12-31T00:00:00Z), for reproducible runs; the clock by default.
    #[arg(long, value_name = "TIME", env = "WINADMIT_NOW")]
    pub now: Option<String>,
    /// winadmit's own namespace: where exceptions count when the policy's
    /// `exceptions.namespaces` lists none.
    #[arg(long, value_name = "NAMESPACE", env = "WINADMIT_NAMESPACE", default_value = crate::entry::exceptions::DEFAULT_OWN_NAMESPACE)]
    pub own_namespace: String,
}

#[derive(Debug, Args)]
pub struct ExceptionsArgs {
    #[command(subcommand)]
    pub what: ExceptionsCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum ExceptionsCommand {
    /// Print the `winadmit.io/skip.<RULE>` annotations of manifests as
    /// PolicyException objects (YAML, for `kubectl apply -f -`): one per
    /// workload and rule, the annotation's text as the reason. For a live
    /// cluster: `kubectl get deploy,ds,sts,job,cj,pods -A -o yaml | winadmit
    /// exceptions from-annotations - --expires ...`.
    FromAnnotations(FromAnnotationsArgs),
}

#[derive(Debug, Args)]
pub struct FromAnnotationsArgs {
    /// Files or directories (.yaml, .yml, .json); `-` reads stdin.
    #[arg(value_name = "PATH", default_value = "-")]
    pub paths: Vec<PathBuf>,
    /// The end date of every exception made (RFC 3339), within the
    /// policy's `exceptions.maxLifetimeDays` from now.
    #[arg(long, value_name = "TIME")]
    pub expires: String,
    /// The namespace the exceptions are made in: one whose exceptions the
    /// policy honours (winadmit's own by default).
    #[arg(long, value_name = "NAMESPACE", env = "WINADMIT_NAMESPACE", default_value = crate::entry::exceptions::DEFAULT_OWN_NAMESPACE)]
    pub namespace: String,
    /// Who answers for the exceptions made.
    #[arg(long)]
    pub owner: Option<String>,
    /// The ticket that records the decision.
    #[arg(long)]
    pub ticket: Option<String>,
    /// The instant "now" is (RFC 3339), for `--expires`' check.
    #[arg(long, value_name = "TIME")]
    pub now: Option<String>,
    #[command(flatten)]
    pub policy: super::PolicyArgs,
}
