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
    /// The attributes to load; each must be a stored attribute of `T`
    /// (otherwise the fetch throws ``SwiftDataError/unsupportedKeyPath``).
    /// When it is not empty, ``ModelContext/fetch(_:)`` leaves the other
    /// attributes out; they load together on the first read or write of
    /// one of them, from the store as it is then.
    public var propertiesToFetch: [PartialKeyPath<T>] = []
    /// The relationships to load with the models; each must be a
    /// relationship of `T` (otherwise the fetch throws
    /// ``SwiftDataError/unsupportedKeyPath``). Their targets are read in
    /// the fetch's read transaction and registered in the context, so
    /// reading the relationship later reads no records.
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

extension FetchDescriptor {
    /// Refuses key paths that name nothing the fetch can load: a
    /// `propertiesToFetch` entry must be a stored attribute of `entity` and
    /// a `relationshipKeyPathsForPrefetching` entry one of its
    /// relationships (see "Partial fetches and prefetching" in
    /// "Differences from SwiftData").
    func checkKeyPaths(of entity: Schema.Entity) throws {
        for path in propertiesToFetch {
            guard let property = entity.property(at: path) else {
                throw SwiftDataError(
                    .unsupportedKeyPath,
                    "propertiesToFetch of \(T.self): \(path) is not a stored attribute (stored: "
                        + entity.attributes.map(\.name).joined(separator: ", ") + ")")
            }
            if property is Schema.Relationship {
                throw SwiftDataError(
                    .unsupportedKeyPath,
                    "propertiesToFetch of \(T.self): \(property.name) is a relationship; name it in "
                        + "relationshipKeyPathsForPrefetching instead")
            }
        }
        for path in relationshipKeyPathsForPrefetching {
            guard entity.relationship(at: path) != nil else {
                throw SwiftDataError(
                    .unsupportedKeyPath,
                    "relationshipKeyPathsForPrefetching of \(T.self): \(path) is not a relationship (relationships: "
                        + entity.relationships.map(\.name).joined(separator: ", ") + ")")
            }
        }
    }
}
