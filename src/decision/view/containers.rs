//! The pod's containers as the rules go through them: every container,
//! init container and ephemeral container of a pod spec ([`containers_of`]),
//! each with the list it comes from ([`ContainerList`]) and its index.

use super::{ContainerView, SecurityContextView, SpecView};

/// Which container list a container came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerList {
    Containers,
    InitContainers,
    EphemeralContainers,
}

impl ContainerList {
    #[must_use]
    pub fn key(self) -> &'static str {
        match self {
            Self::Containers => "containers",
            Self::InitContainers => "initContainers",
            Self::EphemeralContainers => "ephemeralContainers",
        }
    }
}

/// One container of the pod, with where it lives.
#[derive(Clone, Copy)]
pub struct ContainerRef<'v, 'a> {
    pub list: ContainerList,
    pub index: usize,
    pub container: &'v ContainerView<'a>,
}

impl<'v, 'a> ContainerRef<'v, 'a> {
    #[must_use]
    pub fn security_context(&self) -> Option<&'v SecurityContextView<'a>> {
        self.container.security_context.as_ref()
    }

    #[must_use]
    pub fn name(&self) -> &'v str {
        self.container.name.as_deref().unwrap_or_default()
    }
}

/// Every container, init container and ephemeral container of `spec`, in
/// that order. Listed once per evaluation: some twenty rules go through
/// them, and a slice is less code in each than this chain of lists.
#[must_use]
pub fn containers_of<'v, 'a>(spec: &'v SpecView<'a>) -> Vec<ContainerRef<'v, 'a>> {
    [
        (
            ContainerList::InitContainers,
            spec.init_containers.as_deref(),
        ),
        (ContainerList::Containers, spec.containers.as_deref()),
        (
            ContainerList::EphemeralContainers,
            spec.ephemeral_containers.as_deref(),
        ),
    ]
    .into_iter()
    .flat_map(|(list, cs)| {
        cs.unwrap_or_default()
            .iter()
            .enumerate()
            .map(move |(index, container)| ContainerRef {
                list,
                index,
                container,
            })
    })
    .collect()
}
