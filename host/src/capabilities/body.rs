//! `lab:platform/body`: the request body, read by the component.

use super::RequestState;
use crate::bindings::body;
use crate::body::IncomingBody;
use wasmtime::component::Resource;
use wasmtime::Result;

impl body::Host for RequestState {}

impl body::HostIncomingBody for RequestState {
    async fn read(
        &mut self,
        this: Resource<IncomingBody>,
        max: u32,
    ) -> Result<Result<Vec<u8>, body::BodyError>> {
        let body = self.table.get_mut(&this)?;
        Ok(body
            .read(max as usize)
            .await
            .map(|b| b.to_vec())
            .map_err(body::BodyError::Aborted))
    }

    async fn read_line(
        &mut self,
        this: Resource<IncomingBody>,
        max: u32,
    ) -> Result<Result<Vec<u8>, body::BodyError>> {
        let body = self.table.get_mut(&this)?;
        Ok(body
            .read_line(max as usize)
            .await
            .map_err(body::BodyError::Aborted))
    }

    async fn skip(
        &mut self,
        this: Resource<IncomingBody>,
        n: u64,
    ) -> Result<Result<u64, body::BodyError>> {
        let body = self.table.get_mut(&this)?;
        Ok(body.skip(n).await.map_err(body::BodyError::Aborted))
    }

    async fn declared_length(&mut self, this: Resource<IncomingBody>) -> Result<Option<u64>> {
        Ok(self.table.get(&this)?.declared_length())
    }

    async fn drop(&mut self, this: Resource<IncomingBody>) -> Result<()> {
        self.table.delete(this)?;
        Ok(())
    }
}
