import Foundation

// Predicate expressions that `#Predicate` builds on Apple platforms and
// Foundation on Linux does not declare (there they sit behind
// `FOUNDATION_FRAMEWORK`): `caseInsensitiveCompare` and `localizedCompare`
// on strings, and calling another predicate with `evaluate`. Declared with
// Foundation's names only where Foundation lacks them, so that the same
// predicate source compiles everywhere; each evaluates with the String
// method or the predicate it names, as Foundation's do.

#if !canImport(Darwin)
    extension PredicateExpressions {
        /// `root.caseInsensitiveCompare(other)` in a predicate.
        public struct StringCaseInsensitiveCompare<Root: PredicateExpression, Other: PredicateExpression>:
            PredicateExpression
        where Root.Output: StringProtocol, Other.Output: StringProtocol {
            /// How `root` orders against `other`, ignoring case.
            public typealias Output = ComparisonResult
            /// The string compared.
            public let root: Root
            /// The string it is compared with.
            public let other: Other

            /// An expression comparing `root` with `other`, ignoring case.
            public init(root: Root, other: Other) {
                self.root = root
                self.other = other
            }

            /// Compares the two strings with Foundation's
            /// `caseInsensitiveCompare`.
            public func evaluate(_ bindings: PredicateBindings) throws -> ComparisonResult {
                let lhs = try root.evaluate(bindings)
                return lhs.caseInsensitiveCompare(try other.evaluate(bindings))
            }
        }

        /// `root.localizedCompare(other)` in a predicate.
        public struct StringLocalizedCompare<Root: PredicateExpression, Other: PredicateExpression>:
            PredicateExpression
        where Root.Output: StringProtocol, Other.Output: StringProtocol {
            /// How `root` orders against `other` in the current locale.
            public typealias Output = ComparisonResult
            /// The string compared.
            public let root: Root
            /// The string it is compared with.
            public let other: Other

            /// An expression comparing `root` with `other` in the current
            /// locale.
            public init(root: Root, other: Other) {
                self.root = root
                self.other = other
            }

            /// Compares the two strings with Foundation's `localizedCompare`.
            public func evaluate(_ bindings: PredicateBindings) throws -> ComparisonResult {
                let lhs = try root.evaluate(bindings)
                return lhs.localizedCompare(try other.evaluate(bindings))
            }
        }

        /// `predicate.evaluate(input...)` in a predicate: another predicate,
        /// applied to values of this one.
        public struct PredicateEvaluate<Condition: PredicateExpression, each Input: PredicateExpression>:
            PredicateExpression
        where Condition.Output == Predicate<repeat (each Input).Output> {
            /// Whether the other predicate holds for the inputs.
            public typealias Output = Bool
            /// The expression whose value is the other predicate.
            public let predicate: Condition
            /// The expressions whose values the other predicate is given.
            public let input: (repeat each Input)

            /// An expression applying `predicate` to `input`.
            public init(predicate: Condition, input: repeat each Input) {
                self.predicate = predicate
                self.input = (repeat each input)
            }

            /// Evaluates the other predicate on the inputs' values.
            public func evaluate(_ bindings: PredicateBindings) throws -> Bool {
                let condition = try predicate.evaluate(bindings)
                return try condition.evaluate(repeat try (each input).evaluate(bindings))
            }
        }

        // swift-format-ignore: AlwaysUseLowerCamelCase
        /// What `#Predicate` calls for `caseInsensitiveCompare`.
        public static func build_caseInsensitiveCompare<Root, Other>(
            _ root: Root, _ other: Other
        ) -> StringCaseInsensitiveCompare<Root, Other> {
            StringCaseInsensitiveCompare(root: root, other: other)
        }

        // swift-format-ignore: AlwaysUseLowerCamelCase
        /// What `#Predicate` calls for `localizedCompare`.
        public static func build_localizedCompare<Root, Other>(
            _ root: Root, _ other: Other
        ) -> StringLocalizedCompare<Root, Other> {
            StringLocalizedCompare(root: root, other: other)
        }

        // swift-format-ignore: AlwaysUseLowerCamelCase
        /// `predicate.evaluate(input)`: Strata's `#Predicate` writes it as
        /// `predicate ?? input`, which the Linux toolchain's macro accepts
        /// (it refuses `evaluate`); this builds the evaluation from it.
        public static func build_NilCoalesce<Condition, Input>(
            lhs predicate: Condition, rhs input: Input
        ) -> PredicateEvaluate<Condition, Input> {
            PredicateEvaluate(predicate: predicate, input: input)
        }

        // swift-format-ignore: AlwaysUseLowerCamelCase
        /// `expression.evaluate(input)`, written `expression ?? input` by
        /// Strata's `#Predicate` (see the overload above).
        public static func build_NilCoalesce<Transformation, Input, Output>(
            lhs expression: Transformation, rhs input: Input
        ) -> CapturedExpressionEvaluate<Transformation, Input, Output> {
            CapturedExpressionEvaluate(expression: expression, input: input)
        }

        // swift-format-ignore: AlwaysUseLowerCamelCase
        /// What `#Predicate` calls for `evaluate` on another predicate.
        public static func build_evaluate<Condition, each Input>(
            _ predicate: Condition, _ input: repeat each Input
        ) -> PredicateEvaluate<Condition, repeat each Input> {
            PredicateEvaluate(predicate: predicate, input: repeat each input)
        }
    }

    /// `predicate.evaluate(input)`, as Strata's `#Predicate` writes a call
    /// of another predicate inside a predicate (so that the body still
    /// type-checks as Swift, which the macro's argument must; `??` because
    /// it has few other overloads to weigh). Not meant to be called
    /// directly: call `evaluate`.
    public func ?? <Input>(predicate: Predicate<Input>, input: Input) throws -> Bool {
        try predicate.evaluate(input)
    }

    /// `expression.evaluate(input)`, as Strata's `#Predicate` writes a call
    /// of an `#Expression` inside a predicate. Not meant to be called
    /// directly: call `evaluate`.
    public func ?? <Input, Output>(expression: Expression<Input, Output>, input: Input) throws -> Output {
        try expression.evaluate(input)
    }

    /// The two operands of a string comparison, for encoding.
    private enum OperandKeys: String, CodingKey { case root, other }

    extension PredicateExpressions.StringCaseInsensitiveCompare: Codable where Root: Codable, Other: Codable {
        /// Decodes the two operands.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: OperandKeys.self)
            self.init(
                root: try container.decode(Root.self, forKey: .root), other: try container.decode(Other.self, forKey: .other))
        }

        /// Encodes the two operands.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: OperandKeys.self)
            try container.encode(root, forKey: .root)
            try container.encode(other, forKey: .other)
        }
    }

    extension PredicateExpressions.StringLocalizedCompare: Codable where Root: Codable, Other: Codable {
        /// Decodes the two operands.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: OperandKeys.self)
            self.init(
                root: try container.decode(Root.self, forKey: .root), other: try container.decode(Other.self, forKey: .other))
        }

        /// Encodes the two operands.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: OperandKeys.self)
            try container.encode(root, forKey: .root)
            try container.encode(other, forKey: .other)
        }
    }

    extension PredicateExpressions.PredicateEvaluate: Codable where repeat each Input: Codable {
        /// Decodes the called predicate's expression, then each input's. A
        /// predicate that calls a captured predicate cannot be decoded (a
        /// `Predicate` is not `Codable` on its own).
        public init(from decoder: any Decoder) throws {
            var container = try decoder.unkeyedContainer()
            guard let type = Condition.self as? any Decodable.Type, let predicate = try container.decode(type) as? Condition
            else {
                throw DecodingError.dataCorrupted(
                    .init(codingPath: decoder.codingPath, debugDescription: "\(Condition.self) cannot be decoded"))
            }
            self.predicate = predicate
            self.input = (repeat try container.decode((each Input).self))
        }

        /// Encodes the called predicate's expression, then each input's. A
        /// captured predicate cannot be encoded.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.unkeyedContainer()
            guard let predicate = predicate as? any Encodable else {
                throw EncodingError.invalidValue(
                    predicate, .init(codingPath: encoder.codingPath, debugDescription: "\(Condition.self) cannot be encoded"))
            }
            try container.encode(predicate)
            repeat try container.encode(each input)
        }
    }

    extension PredicateExpressions {
        /// `expression.evaluate(input)` in a predicate, for a captured
        /// `#Expression` (Foundation's `ExpressionEvaluate` needs its
        /// expression to be archivable, which a captured one is not).
        public struct CapturedExpressionEvaluate<Transformation: PredicateExpression, Input: PredicateExpression, Output>:
            PredicateExpression
        where Transformation.Output == Expression<Input.Output, Output> {
            /// The expression whose value is the `#Expression` called.
            public let expression: Transformation
            /// The expression whose value it is given.
            public let input: Input

            /// An expression applying `expression` to `input`.
            public init(expression: Transformation, input: Input) {
                self.expression = expression
                self.input = input
            }

            /// Evaluates the called expression on the input's value.
            public func evaluate(_ bindings: PredicateBindings) throws -> Output {
                try expression.evaluate(bindings).evaluate(try input.evaluate(bindings))
            }
        }
    }

    // Unchecked: a `StandardPredicateExpression` must be `Sendable`, and a
    // conformance to it cannot depend on `Sendable`. The called predicate or
    // expression is a captured `Predicate` or `Expression` value, which is.
    extension PredicateExpressions.CapturedExpressionEvaluate: @unchecked Sendable {}
    extension PredicateExpressions.CapturedExpressionEvaluate: Codable where Input: Codable {
        /// Decodes the called expression (when it can be) and the input.
        public init(from decoder: any Decoder) throws {
            var container = try decoder.unkeyedContainer()
            guard let type = Transformation.self as? any Decodable.Type,
                let expression = try container.decode(type) as? Transformation
            else {
                throw DecodingError.dataCorrupted(
                    .init(codingPath: decoder.codingPath, debugDescription: "\(Transformation.self) cannot be decoded"))
            }
            self.init(expression: expression, input: try container.decode(Input.self))
        }

        /// Encodes the called expression (when it can be) and the input.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.unkeyedContainer()
            guard let expression = expression as? any Encodable else {
                throw EncodingError.invalidValue(
                    expression,
                    .init(codingPath: encoder.codingPath, debugDescription: "\(Transformation.self) cannot be encoded"))
            }
            try container.encode(expression)
            try container.encode(input)
        }
    }
    extension PredicateExpressions.CapturedExpressionEvaluate: StandardPredicateExpression
    where Input: StandardPredicateExpression {}

    extension PredicateExpressions.StringCaseInsensitiveCompare: Sendable where Root: Sendable, Other: Sendable {}
    extension PredicateExpressions.StringCaseInsensitiveCompare: StandardPredicateExpression
    where Root: StandardPredicateExpression, Other: StandardPredicateExpression {}
    extension PredicateExpressions.StringLocalizedCompare: Sendable where Root: Sendable, Other: Sendable {}
    extension PredicateExpressions.StringLocalizedCompare: StandardPredicateExpression
    where Root: StandardPredicateExpression, Other: StandardPredicateExpression {}
    extension PredicateExpressions.PredicateEvaluate: @unchecked Sendable {}
    extension PredicateExpressions.PredicateEvaluate: StandardPredicateExpression
    where repeat each Input: StandardPredicateExpression {}
#endif
