/// Strata: SwiftData's model layer on Strata's own storage engine.
///
/// The model layer (`@Model`, `ModelContainer`, `ModelContext`, …) is being
/// built on ``StrataEngine``; this module re-exports the engine so that the
/// store can already be used as an ordered key-value store.
@_exported import StrataEngine
