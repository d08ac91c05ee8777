/// Strata: SwiftData's model layer on Strata's own storage engine.
///
/// `import Strata` gives what `import SwiftData` gives: the model macros,
/// ``ModelContainer``, ``ModelContext``, ``FetchDescriptor``, Foundation
/// (for `#Predicate` and `SortDescriptor`) and Observation. The storage
/// engine (`StrataEngine`) is re-exported too.
@_exported import Foundation
@_exported import Observation
@_exported import StrataEngine
