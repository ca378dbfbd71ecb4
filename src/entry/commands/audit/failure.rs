//! What a failed call to the API server was, said once and with the fix
//! for that failure only: a refused connection is not an RBAC problem, and
//! a 403 is not a network one.

use std::error::Error as StdError;

/// The kind of failure a list, watch or write met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Nothing listens at the API server's address.
    Refused,
    /// The TLS handshake failed (an unknown CA, a name the certificate
    /// does not hold, an expired certificate).
    Tls,
    /// 401: the credentials were not accepted.
    Unauthorized,
    /// 403: the credentials are not allowed this verb on this resource.
    Forbidden,
    /// 404: the API server does not serve the resource.
    NotFound,
    /// Any other failure to reach the API server (a timeout, a name that
    /// does not resolve, a connection reset).
    Unreachable,
    /// Another answer of the API server.
    Other,
}

impl Failure {
    /// The kind of `err`, from its HTTP status or from its causes.
    #[must_use]
    pub fn of(err: &kube::Error) -> Self {
        if let kube::Error::Api(status) = err {
            return match status.code {
                401 => Self::Unauthorized,
                403 => Self::Forbidden,
                404 => Self::NotFound,
                _ => Self::Other,
            };
        }
        let mut next: Option<&(dyn StdError + 'static)> = Some(err);
        while let Some(e) = next {
            if e.downcast_ref::<rustls::Error>().is_some() {
                return Self::Tls;
            }
            if let Some(io) = e.downcast_ref::<std::io::Error>() {
                if io.kind() == std::io::ErrorKind::ConnectionRefused {
                    return Self::Refused;
                }
                if io
                    .get_ref()
                    .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
                {
                    return Self::Tls;
                }
            }
            next = e.source();
        }
        Self::Unreachable
    }

    /// What the API server or the connection said: the status message
    /// of an answer (kube's own text repeats the whole status), the causes
    /// of a failed connection.
    #[must_use]
    pub fn detail(err: &kube::Error) -> String {
        match err {
            kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
            _ => crate::entry::errors::error_chain(err),
        }
    }

    /// What it was, in a few words.
    #[must_use]
    pub fn what(self) -> &'static str {
        match self {
            Self::Refused => "connection refused",
            Self::Tls => "TLS handshake failed",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not found",
            Self::Unreachable => "cannot reach the API server",
            Self::Other => "refused by the API server",
        }
    }

    /// What to do about it; `resource` is what was listed or written,
    /// `verbs` what the audit's service account needs on it.
    #[must_use]
    pub fn fix(self, resource: &str, verbs: &str) -> String {
        match self {
            Self::Refused => "nothing listens at the API server's address: check the server of --kubeconfig (or the pod's KUBERNETES_SERVICE_HOST) and that the API server runs".to_owned(),
            Self::Tls => "the API server's certificate is not trusted or does not name the address used: check certificate-authority-data and server in --kubeconfig".to_owned(),
            Self::Unauthorized => "the credentials were not accepted: check the kubeconfig user's token or certificate (in a pod: the service account token)".to_owned(),
            Self::Forbidden => format!("grant {verbs} on {resource} to the audit's service account (the chart's ClusterRole winadmit-audit)"),
            Self::NotFound => format!("the API server does not serve {resource}"),
            Self::Unreachable => "check the network path to the API server".to_owned(),
            Self::Other => "see the API server's message".to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(
            kube::core::Status::failure("nope", "Reason").with_code(code),
        ))
    }

    #[test]
    fn each_failure_gets_its_own_fix_and_only_a_403_the_rbac_one() {
        let refused =
            kube::Error::ReadEvents(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        let tls = kube::Error::ReadEvents(std::io::Error::other(
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        ));
        let reset =
            kube::Error::ReadEvents(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        let cases = [
            (refused, Failure::Refused),
            (tls, Failure::Tls),
            (reset, Failure::Unreachable),
            (api(401), Failure::Unauthorized),
            (api(403), Failure::Forbidden),
            (api(404), Failure::NotFound),
            (api(500), Failure::Other),
        ];
        assert_eq!(Failure::detail(&api(403)), "nope");
        for (err, want) in cases {
            let got = Failure::of(&err);
            assert_eq!(got, want, "{err}");
            let fix = got.fix("deployments.apps", "get, list and watch");
            assert_eq!(
                fix.contains("grant"),
                want == Failure::Forbidden,
                "{want:?}: {fix}"
            );
        }
    }
}
