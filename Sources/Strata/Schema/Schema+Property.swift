import Foundation

extension Schema {
    /// What attributes and relationships have in common.
    ///
    /// The macros create these with options only; the entity fills in the
    /// name, key path, field number and type when it is built.
    public class Property: @unchecked Sendable, CustomStringConvertible {
        /// The property's name in its class, which is also its name in the
        /// store.
        @exclusivity(unchecked) public internal(set) var name = ""
        /// The key path of the property on its model class.
        @exclusivity(unchecked) public internal(set) var keypath: AnyKeyPath = \Property.name
        /// The property's position among its entity's persisted properties.
        @exclusivity(unchecked) public internal(set) var field = 0
        /// The property's name in an earlier version, so that migration can
        /// follow a rename; nil when it was not renamed.
        public let originalName: String?
        /// Given to force a new version hash (it counts in the stored schema's
        /// hash); nil when not given.
        public let hashModifier: String?
        /// The declared type (`Optional<Date>` for `Date?`).
        @exclusivity(unchecked) public internal(set) var valueType: Any.Type = Any.self
        /// True when the declared type is optional.
        public var isOptional: Bool { valueType is any _OptionalMarker.Type }
        /// The value the property's declaration gives it, when it has one.
        @exclusivity(unchecked) public internal(set) var defaultValue: Any?
        /// How the query evaluator reads the property from a record.
        @exclusivity(unchecked) var storedKind = StoredKind.opaque
        /// Whether values of the property can be part of a key.
        @exclusivity(unchecked) var isKeyable = false

        init(originalName: String?, hashModifier: String?) {
            self.originalName = originalName
            self.hashModifier = hashModifier
        }

        func bind(_ metadata: PropertyMetadata, field: Int, valueType: Any.Type) {
            self.name = metadata.name
            self.keypath = metadata.keypath
            self.field = field
            self.valueType = valueType
            self.defaultValue = metadata.defaultValue
            self.storedKind = self is Relationship ? .relationship : StoredKind(valueType)
            self.isKeyable = !(self is Relationship) && KeyValue.isKeyable(valueType)
        }

        /// The property as `name: Type`.
        public var description: String { "\(name): \(valueType)" }
    }

    /// A stored value property, with the options of `@Attribute`.
    public final class Attribute: Property, @unchecked Sendable {
        /// What `@Attribute` can ask for.
        public enum Option: Hashable, Sendable {
            /// Inserting a model whose value matches a stored one updates
            /// the stored one (upsert).
            case unique
            /// Large data kept outside the record.
            case externalStorage
            /// Kept in the history tombstone when the model is deleted.
            case preserveValueOnDeletion
            /// Tracked in memory, never stored.
            case ephemeral
            /// Accepted for source compatibility; no effect on Linux.
            case spotlight
            /// Accepted for source compatibility; no effect (no CloudKit).
            case allowsCloudEncryption
            /// The value is stored as the `Data` the `ValueTransformer`
            /// registered under this name makes of it, and read back through
            /// its reverse transformation; its type need not be Codable.
            case transformable(by: String)

            /// The value is stored through an instance of `transformerType`
            /// (or the transformer registered under the type's qualified
            /// name, `Module.Type`, as Core Data names a Swift class), as
            /// the other form.
            public static func transformable(by transformerType: ValueTransformer.Type) -> Option {
                let name = String(reflecting: transformerType)
                TransformerRegistry.register(transformerType, as: name)
                return .transformable(by: name)
            }
        }

        /// The options given to `@Attribute`.
        public let options: [Option]
        /// True when the options include `.unique`.
        public var isUnique: Bool { options.contains(.unique) }
        /// True when the options include `.transformable(by:)`.
        public var isTransformable: Bool {
            options.contains { if case .transformable = $0 { true } else { false } }
        }

        /// An attribute with `options`. `originalName` is its name in an
        /// earlier version, for migration; `hashModifier` forces a new version
        /// hash. The macros make these; the entity fills in the rest when it is
        /// built.
        public init(_ options: Option..., originalName: String? = nil, hashModifier: String? = nil) {
            self.options = options
            super.init(originalName: originalName, hashModifier: hashModifier)
        }
    }

    /// A reference to other models, with the options of `@Relationship`.
    public final class Relationship: Property, @unchecked Sendable {
        /// What `@Relationship` can ask for.
        public enum Option: Hashable, Sendable {
            /// The related models' values are unique (SwiftData's option).
            case unique
        }

        /// What deleting the model does to the models it refers to.
        public enum DeleteRule: String, Codable, Hashable, Sendable {
            /// Clear the references to the deleted model (the default).
            case nullify
            /// Delete the related models too.
            case cascade
            /// Refuse to delete while related models exist.
            case deny
            /// Leave the related models as they are.
            case noAction
        }

        /// The options given to `@Relationship`.
        public let options: [Option]
        /// What deleting the model does to the models this relationship refers
        /// to.
        public let deleteRule: DeleteRule
        /// The fewest models a to-many relationship must hold when saved; 0 or
        /// nil for no minimum.
        public let minimumModelCount: Int?
        /// The most models a to-many relationship may hold when saved; 0 or nil
        /// for no maximum.
        public let maximumModelCount: Int?
        /// The inverse relationship on the related model, when this side names
        /// it with `inverse:`. When nil, the other side may name this one, or
        /// Strata infers the inverse as SwiftData does.
        public let inverseKeyPath: AnyKeyPath?
        /// The related model type.
        package var destinationType: (any PersistentModel.Type)?
        /// The related entity's name.
        public var destination: String { destinationType.map { "\($0)" } ?? "" }
        /// True for `T` and `T?`, false for `[T]`.
        @exclusivity(unchecked) public internal(set) var isToOneRelationship = true

        /// A relationship with `options`, a delete rule, bounds on its model
        /// count (0 or nil for none) and, optionally, its `inverse`;
        /// `originalName` and `hashModifier` are as for an attribute. The
        /// macros make these; the entity fills in the rest when it is built.
        public init(
            _ options: Option..., deleteRule: DeleteRule = .nullify, minimumModelCount: Int? = 0,
            maximumModelCount: Int? = 0, originalName: String? = nil, inverse: AnyKeyPath? = nil,
            hashModifier: String? = nil
        ) {
            self.options = options
            self.deleteRule = deleteRule
            self.minimumModelCount = minimumModelCount
            self.maximumModelCount = maximumModelCount
            self.inverseKeyPath = inverse
            super.init(originalName: originalName, hashModifier: hashModifier)
        }

        /// The model type of a relationship property's value type (`T`, `T?`,
        /// `[T]` or `[T]?` where `T` is a model), and whether it is to-one.
        static func destination(of valueType: Any.Type) -> (any PersistentModel.Type, toOne: Bool)? {
            if let model = valueType as? any PersistentModel.Type { return (model, true) }
            if let optional = valueType as? any _OptionalMarker.Type {
                if let model = optional._wrappedType as? any PersistentModel.Type { return (model, true) }
                if let array = optional._wrappedType as? any _ArrayMarker.Type,
                    let model = array._elementType as? any PersistentModel.Type
                {
                    return (model, false)
                }
                return nil
            }
            if let array = valueType as? any _ArrayMarker.Type, let model = array._elementType as? any PersistentModel.Type {
                return (model, false)
            }
            return nil
        }
    }
}
