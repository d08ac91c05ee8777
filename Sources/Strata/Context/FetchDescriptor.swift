/// What to fetch: one model type, an optional predicate, sort order and
/// paging.
///
/// It is `Sendable`, as SwiftData's is: a descriptor can be kept in a
/// `Sendable` type or passed to an actor (its key paths and predicate are
/// immutable values).
public struct FetchDescriptor<T: PersistentModel>: @unchecked Sendable {
    /// Which models to fetch; nil fetches every model of the type.
    public var predicate: Predicate<T>?
    /// Applied in order; ties keep row (insertion) order.
    public var sortBy: [SortDescriptor<T>]
    /// The most models the fetch returns; nil or 0 for no limit (0 means no
    /// limit in Core Data, which SwiftData runs on).
    public var fetchLimit: Int?
    /// How many matching models, in sort order, to skip before the first one
    /// returned; nil, 0 or a negative number skips none.
    public var fetchOffset: Int?
    /// Whether unsaved inserts and deletes of the context count (they do
    /// by default, as in SwiftData).
    public var includePendingChanges = true
    /// Accepted for source compatibility: Strata loads whole records.
    public var propertiesToFetch: [PartialKeyPath<T>] = []
    /// Accepted for source compatibility: relationships load on access.
    public var relationshipKeyPathsForPrefetching: [PartialKeyPath<T>] = []

    /// A descriptor that fetches the models of type `T` that match `predicate`
    /// (all of them when it is nil), sorted by `sortBy`.
    public init(predicate: Predicate<T>? = nil, sortBy: [SortDescriptor<T>] = []) {
        self.predicate = predicate
        self.sortBy = sortBy
    }

    /// The limit the fetch applies: nil for none (`fetchLimit` nil or 0),
    /// otherwise `fetchLimit` (a negative one returns nothing).
    var limit: Int? {
        guard let fetchLimit, fetchLimit != 0 else { return nil }
        return fetchLimit
    }
}
