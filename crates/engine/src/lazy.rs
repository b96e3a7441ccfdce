//! The schema the dataset's tables and the library's views live in (`memq.main`). A view is
//! planned (and its `@column` lines checked against the plan) the first time a statement names
//! it, then kept: opening a dataset costs the same whatever the size of the library, and a
//! statement plans only the views it reads (and the views those read).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use async_trait::async_trait;
use datafusion::catalog::view::ViewTable;
use datafusion::catalog::{MemorySchemaProvider, SchemaProvider, TableProvider};
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::execution::context::SessionState;

use crate::library::{self, Analysis};

pub struct LibrarySchema {
    tables: MemorySchemaProvider,
    /// The views of the library, by name, not yet planned.
    views: HashMap<String, Analysis>,
    planned: Mutex<HashMap<String, Arc<dyn TableProvider>>>,
    /// The session the views are planned in (set once the context exists).
    state: OnceLock<Weak<parking_lot::RwLock<SessionState>>>,
}

impl std::fmt::Debug for LibrarySchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LibrarySchema")
            .field("views", &self.views.len())
            .finish()
    }
}

impl LibrarySchema {
    /// The views among `analyses` (table functions are planned when called, elsewhere).
    pub fn new(analyses: &[Analysis]) -> LibrarySchema {
        LibrarySchema {
            tables: MemorySchemaProvider::new(),
            views: analyses
                .iter()
                .filter(|a| !a.is_table_function())
                .map(|a| (a.name.clone(), a.clone()))
                .collect(),
            planned: Mutex::new(HashMap::new()),
            state: OnceLock::new(),
        }
    }

    /// The session whose state plans the views.
    pub fn bind(&self, state: Weak<parking_lot::RwLock<SessionState>>) {
        let _ = self.state.set(state);
    }

    async fn plan_view(&self, a: &Analysis) -> DfResult<Arc<dyn TableProvider>> {
        let state = self
            .state
            .get()
            .and_then(Weak::upgrade)
            .ok_or_else(|| DataFusionError::Internal("the session has ended".into()))?;
        // A snapshot of the session: planning must not hold its lock across awaits.
        let state = state.read().clone();
        let plan = library::plan(&state, a, Default::default())
            .await
            .map_err(|e| DataFusionError::Plan(format!("sql/{}: {e}", a.path)))?;
        Ok(Arc::new(ViewTable::new(plan, Some(a.body.clone()))))
    }
}

#[async_trait]
impl SchemaProvider for LibrarySchema {
    fn table_names(&self) -> Vec<String> {
        let mut names = self.tables.table_names();
        names.extend(self.views.keys().cloned());
        names.sort();
        names.dedup();
        names
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        if let Some(t) = self.tables.table(name).await? {
            return Ok(Some(t));
        }
        let Some(a) = self.views.get(name) else {
            return Ok(None);
        };
        if let Some(t) = self.planned.lock().ok().and_then(|p| p.get(name).cloned()) {
            return Ok(Some(t));
        }
        let view = self.plan_view(a).await?;
        if let Ok(mut p) = self.planned.lock() {
            p.insert(name.to_string(), view.clone());
        }
        Ok(Some(view))
    }

    fn register_table(
        &self,
        name: String,
        table: Arc<dyn TableProvider>,
    ) -> DfResult<Option<Arc<dyn TableProvider>>> {
        self.tables.register_table(name, table)
    }

    fn deregister_table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        self.tables.deregister_table(name)
    }

    fn table_exist(&self, name: &str) -> bool {
        self.tables.table_exist(name) || self.views.contains_key(name)
    }
}
