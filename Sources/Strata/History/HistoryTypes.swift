import Foundation

/// A position in a store's history. Tokens order transactions: a later
/// save has a greater token.
public protocol HistoryToken: Codable, Comparable, Hashable, Sendable {}

/// The token of a ``DefaultHistoryTransaction``: the store's save counter
/// at that save. Keep it (it is Codable) to fetch what happened after it.
public struct DefaultHistoryToken: HistoryToken, CustomStringConvertible {
    /// The store the token belongs to.
    public let storeIdentifier: String
    /// The save's number in the store; the first save is 1.
    public let tokenValue: Int64

    init(storeIdentifier: String, tokenValue: Int64) {
        self.storeIdentifier = storeIdentifier
        self.tokenValue = tokenValue
    }

    /// Orders tokens by save number (tokens of one store, as the history
    /// of one store is ordered); tokens of different stores with one
    /// number order by store identifier, and are never equal.
    public static func < (a: Self, b: Self) -> Bool {
        (a.tokenValue, a.storeIdentifier) < (b.tokenValue, b.storeIdentifier)
    }
    public static func == (a: Self, b: Self) -> Bool {
        a.tokenValue == b.tokenValue && a.storeIdentifier == b.storeIdentifier
    }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(tokenValue)
        hasher.combine(storeIdentifier)
    }

    public var description: String { "DefaultHistoryToken(\(tokenValue))" }
}

/// One save as the history recorded it.
public protocol HistoryTransaction: Hashable, Identifiable, Sendable {
    associatedtype Token: HistoryToken
    var token: Token { get }
    /// The saving context's ``ModelContext/author``.
    var author: String? { get }
    var timestamp: Date { get }
    var changes: [HistoryChange] { get }
    var transactionIdentifier: Int64 { get }
    var storeIdentifier: String { get }
    var bundleIdentifier: String { get }
    var processIdentifier: String { get }
}

/// The history transaction Strata records for each save.
public struct DefaultHistoryTransaction: HistoryTransaction, @unchecked Sendable {
    public let token: DefaultHistoryToken
    public let author: String?
    public let timestamp: Date
    /// The inserted, updated and deleted models, in that order.
    public let changes: [HistoryChange]
    public var transactionIdentifier: Int64 { token.tokenValue }
    public var storeIdentifier: String { token.storeIdentifier }
    /// The saving process's name (Strata has no bundles).
    public let bundleIdentifier: String
    public let processIdentifier: String
    public var id: Int64 { token.tokenValue }

    public static func == (a: Self, b: Self) -> Bool { a.token == b.token }
    public func hash(into hasher: inout Hasher) { hasher.combine(token) }
}

/// One model's change in a history transaction.
public enum HistoryChange: @unchecked Sendable {
    case insert(any HistoryInsert)
    case update(any HistoryUpdate)
    case delete(any HistoryDelete)

    /// The identifier of the inserted, updated or deleted model.
    public var changedPersistentIdentifier: PersistentIdentifier {
        switch self {
        case .insert(let change): return change.changedPersistentIdentifier
        case .update(let change): return change.changedPersistentIdentifier
        case .delete(let change): return change.changedPersistentIdentifier
        }
    }
}

/// A model inserted by a save.
public protocol HistoryInsert<Model> {
    associatedtype Model: PersistentModel
    var changedPersistentIdentifier: PersistentIdentifier { get }
    var changeIdentifier: Int64 { get }
    var transactionIdentifier: Int64 { get }
}

/// A model updated by a save, with the attributes whose stored values
/// changed.
public protocol HistoryUpdate<Model> {
    associatedtype Model: PersistentModel
    var changedPersistentIdentifier: PersistentIdentifier { get }
    var changeIdentifier: Int64 { get }
    var transactionIdentifier: Int64 { get }
    var updatedAttributes: [PartialKeyPath<Model>] { get }
}

/// A model deleted by a save, with the values of its
/// `.preserveValueOnDeletion` attributes.
public protocol HistoryDelete<Model> {
    associatedtype Model: PersistentModel
    var changedPersistentIdentifier: PersistentIdentifier { get }
    var changeIdentifier: Int64 { get }
    var transactionIdentifier: Int64 { get }
    var tombstone: HistoryTombstone<Model> { get }
}

public struct DefaultHistoryInsert<Model: PersistentModel>: HistoryInsert {
    public let changedPersistentIdentifier: PersistentIdentifier
    public let changeIdentifier: Int64
    public let transactionIdentifier: Int64
}

public struct DefaultHistoryUpdate<Model: PersistentModel>: HistoryUpdate {
    public let changedPersistentIdentifier: PersistentIdentifier
    public let changeIdentifier: Int64
    public let transactionIdentifier: Int64
    public let updatedAttributes: [PartialKeyPath<Model>]
}

public struct DefaultHistoryDelete<Model: PersistentModel>: HistoryDelete {
    public let changedPersistentIdentifier: PersistentIdentifier
    public let changeIdentifier: Int64
    public let transactionIdentifier: Int64
    public let tombstone: HistoryTombstone<Model>
}

/// The values a deleted model's `.preserveValueOnDeletion` attributes had.
public struct HistoryTombstone<Model: PersistentModel>: Sequence, @unchecked Sendable {
    /// Values by attribute name, of the attribute's declared type.
    let values: [String: Any]

    /// The preserved value of `keyPath`; nil when the attribute is not
    /// preserved (or was nil).
    public subscript<Value>(_ keyPath: KeyPath<Model, Value>) -> Value? {
        guard let name = Model.schemaMetadata.first(where: { $0.keypath == keyPath })?.name else { return nil }
        return values[name] as? Value
    }

    /// Each preserved attribute's key path and value.
    public func makeIterator() -> some IteratorProtocol<(keyPath: PartialKeyPath<Model>, value: Any)> {
        Model.schemaMetadata.compactMap { metadata -> (keyPath: PartialKeyPath<Model>, value: Any)? in
            guard let value = values[metadata.name], let keyPath = metadata.keypath as? PartialKeyPath<Model> else {
                return nil
            }
            return (keyPath, value)
        }.makeIterator()
    }
}

/// Which history transactions ``ModelContext/fetchHistory(_:)`` returns
/// or ``ModelContext/deleteHistory(_:)`` removes.
public struct HistoryDescriptor<T: HistoryTransaction> {
    public var predicate: Predicate<T>?
    /// Ascending token order when empty.
    public var sortBy: [SortDescriptor<T>]
    public var fetchLimit: Int?

    public init(predicate: Predicate<T>? = nil, sortBy: [SortDescriptor<T>] = []) {
        self.predicate = predicate
        self.sortBy = sortBy
    }
}
