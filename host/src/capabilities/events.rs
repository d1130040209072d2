//! `advances` (the journal service announces) and `subscriptions` (the
//! coordination service opens and closes), over the process's
//! [`crate::events`].

use super::RequestState;
use crate::bindings::advances::{self, Advance};
use crate::bindings::subscriptions::{self, OpenError, Scope};
use crate::events;
use wasmtime::Result;

impl advances::Host for RequestState {
    async fn listening(&mut self) -> Result<bool> {
        Ok(self.env.feed.as_ref().is_some_and(|feed| feed.listening()))
    }

    async fn announce(&mut self, advances: Vec<Advance>) -> Result<()> {
        if let Some(feed) = &self.env.feed {
            let advances: Vec<events::Advance> = advances
                .into_iter()
                .map(|a| events::Advance {
                    journal: events::Journal {
                        root_id: a.root_id,
                        space_id: a.space_id,
                        path: a.path,
                    },
                    cutoff: a.cutoff,
                })
                .collect();
            feed.announce(&advances);
        }
        Ok(())
    }
}

impl subscriptions::Host for RequestState {
    async fn open(
        &mut self,
        connection: u64,
        id: String,
        scope: Scope,
        expires_at: u64,
        grants: Vec<String>,
    ) -> Result<Result<(), OpenError>> {
        // Only the coordination service holds the hub.
        let Some(hub) = self.env.hub.clone() else {
            return Ok(Err(OpenError::Closed));
        };
        let scope = events::Scope {
            prefix: scope.prefix,
            depth: scope.depth,
            hidden: scope.hidden,
            root_id: scope.root_id,
            space_id: scope.space_id,
        };
        Ok(
            match hub.open(connection, id, scope, expires_at, grants).await {
                Ok(()) => Ok(()),
                Err(events::OpenError::LimitExceeded) => Err(OpenError::LimitExceeded),
                Err(events::OpenError::Closed) => Err(OpenError::Closed),
                Err(events::OpenError::Unavailable(why)) => Err(OpenError::Unavailable(why)),
            },
        )
    }

    async fn close(&mut self, connection: u64, id: String) -> Result<bool> {
        Ok(self
            .env
            .hub
            .as_ref()
            .is_some_and(|hub| hub.close(connection, &id)))
    }

    /// A revocation other hosts cannot be told of fails the request (a
    /// trap): the grants are revoked already, and a retry of the request
    /// revokes them again, which tells them.
    async fn revoke(&mut self, grants: Vec<String>) -> Result<()> {
        if let Some(hub) = &self.env.hub {
            hub.revoke_everywhere(&grants).await.map_err(|e| {
                wasmtime::Error::msg(format!(
                    "the revocation could not be told to the other hosts: {e}"
                ))
            })?;
        }
        Ok(())
    }
}
