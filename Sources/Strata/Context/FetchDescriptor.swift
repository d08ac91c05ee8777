/// What to fetch: one model type, an optional predicate, sort order and
/// paging.
public struct FetchDescriptor<T: PersistentModel> {
    public var predicate: Predicate<T>?
    /// Applied in order; ties keep row (insertion) order.
    public var sortBy: [SortDescriptor<T>]
    public var fetchLimit: Int?
    public var fetchOffset: Int?
    /// Whether unsaved inserts and deletes of the context count (they do
    /// by default, as in SwiftData).
    public var includePendingChanges = true
    /// Accepted for source compatibility: Strata loads whole records.
    public var propertiesToFetch: [PartialKeyPath<T>] = []
    /// Accepted for source compatibility: relationships load on access.
    public var relationshipKeyPathsForPrefetching: [PartialKeyPath<T>] = []

    public init(predicate: Predicate<T>? = nil, sortBy: [SortDescriptor<T>] = []) {
        self.predicate = predicate
        self.sortBy = sortBy
    }
}
