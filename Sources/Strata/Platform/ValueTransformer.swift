import Foundation

// `@Attribute(.transformable(by:))` names a `ValueTransformer` subclass:
// the transformer turns the property's value into `Data` to store and back.
// Foundation on Linux has no `ValueTransformer`; Strata declares it where
// Foundation lacks it, with Foundation's names and meaning (a registry of
// named transformers, forward and reverse transformation), so a model's
// transformer compiles and runs everywhere. Foundation's archiving
// transformers (`NSSecureUnarchiveFromDataTransformer`) need the
// Objective-C runtime and are not declared.

#if !canImport(Darwin)
    /// The name a ``ValueTransformer`` is registered under.
    public struct NSValueTransformerName: RawRepresentable, Hashable, Sendable {
        /// The name.
        public let rawValue: String

        /// The name `rawValue`.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The name `rawValue`.
        public init(_ rawValue: String) { self.rawValue = rawValue }
    }

    /// Converts a value to another form and, when it allows, back; as
    /// Foundation's `ValueTransformer` on Apple platforms. Subclass it and
    /// override ``transformedValue(_:)`` (and ``reverseTransformedValue(_:)``
    /// with ``allowsReverseTransformation()``).
    open class ValueTransformer: NSObject, @unchecked Sendable {
        private static let registry = Locked<[String: ValueTransformer]>([:])

        /// A transformer that returns what it is given.
        public required override init() { super.init() }

        /// Registers `transformer` under `name` (nil removes the name).
        open class func setValueTransformer(_ transformer: ValueTransformer?, forName name: NSValueTransformerName) {
            registry.withLock { $0[name.rawValue] = transformer }
        }

        /// The transformer registered under `name`, or nil.
        static func registered(forName name: String) -> ValueTransformer? {
            registry.withLock { $0[name] }
        }

        /// The names transformers are registered under.
        open class func valueTransformerNames() -> [NSValueTransformerName] {
            registry.withLock { $0.keys.sorted().map(NSValueTransformerName.init(rawValue:)) }
        }

        /// The class of the values ``transformedValue(_:)`` returns.
        open class func transformedValueClass() -> AnyClass { NSObject.self }

        /// Whether ``reverseTransformedValue(_:)`` undoes
        /// ``transformedValue(_:)``; false unless a subclass says so.
        open class func allowsReverseTransformation() -> Bool { false }

        /// `value` transformed; this class returns it unchanged.
        open func transformedValue(_ value: Any?) -> Any? { value }

        /// `value` transformed back; this class returns it unchanged.
        open func reverseTransformedValue(_ value: Any?) -> Any? { value }
    }

    /// Gives ``ValueTransformer`` Foundation's lookup initializer, which
    /// returns a registered instance (a protocol extension's initializer can;
    /// a class's cannot).
    public protocol _ValueTransformerLookup {}

    extension ValueTransformer: _ValueTransformerLookup {}

    extension _ValueTransformerLookup where Self: ValueTransformer {
        /// The transformer registered under `name`, or nil when none is.
        public init?(forName name: NSValueTransformerName) {
            guard let found = ValueTransformer.registered(forName: name.rawValue) as? Self else { return nil }
            self = found
        }
    }
#endif
