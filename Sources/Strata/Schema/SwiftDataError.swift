/// The errors of the model layer, named as SwiftData names them where
/// SwiftData has a name (`SwiftDataError.unsupportedPredicate`, …), plus
/// Strata's own (a damaged record, a read-only store, a schema mismatch).
///
/// Two errors are equal when their codes are equal, so that
/// `catch let error as SwiftDataError where error == .readOnlyStore` works;
/// ``message`` says what happened and where.
public struct SwiftDataError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Code: String, Hashable, Sendable {
        case loadIssueModelContainer
        case unknownSchema
        case configurationSchemaNotFoundInContainerSchema
        case modelValidationFailure
        case unsupportedPredicate
        case unsupportedSortDescriptor
        case includePendingChangesWithBatchSize
        case backwardMigration
        case historyTokenExpired
        /// Saving through a configuration with `allowsSave: false`.
        case readOnlyStore
        /// The store was written with a schema that differs from the
        /// container's, and no migration applies.
        case schemaMismatch
        /// A record's bytes cannot be decoded.
        case corruptRecord
        /// A model type the container's schema does not include.
        case unknownModelType
        /// A save would give two rows the same values of a unique
        /// constraint, where no upsert applies (a changed model taking
        /// another row's values, or an insert matching two different rows).
        case uniqueConstraintViolation
        /// A save would write a model whose row another context's save
        /// deleted: the save writes nothing rather than re-create the row.
        /// Roll the change back, or delete the model in this context too.
        case modelDeleted
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public static func == (a: SwiftDataError, b: SwiftDataError) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    public var description: String { "\(code.rawValue): \(message)" }

    public static let loadIssueModelContainer = SwiftDataError(.loadIssueModelContainer, "")
    public static let unknownSchema = SwiftDataError(.unknownSchema, "")
    public static let configurationSchemaNotFoundInContainerSchema = SwiftDataError(
        .configurationSchemaNotFoundInContainerSchema, "")
    public static let modelValidationFailure = SwiftDataError(.modelValidationFailure, "")
    public static let unsupportedPredicate = SwiftDataError(.unsupportedPredicate, "")
    public static let unsupportedSortDescriptor = SwiftDataError(.unsupportedSortDescriptor, "")
    public static let includePendingChangesWithBatchSize = SwiftDataError(.includePendingChangesWithBatchSize, "")
    public static let backwardMigration = SwiftDataError(.backwardMigration, "")
    public static let historyTokenExpired = SwiftDataError(.historyTokenExpired, "")
    public static let readOnlyStore = SwiftDataError(.readOnlyStore, "")
    public static let schemaMismatch = SwiftDataError(.schemaMismatch, "")
    public static let corruptRecord = SwiftDataError(.corruptRecord, "")
    public static let unknownModelType = SwiftDataError(.unknownModelType, "")
    public static let uniqueConstraintViolation = SwiftDataError(.uniqueConstraintViolation, "")
    public static let modelDeleted = SwiftDataError(.modelDeleted, "")
}
